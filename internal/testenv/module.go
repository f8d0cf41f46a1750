package testenv

import (
	"errors"
	"os"
	"path/filepath"
)

// ModuleRoot is the directory of the module's go.mod, found from the working directory up:
// a test runs in its package's directory. It does not use the source file's path, which
// `make test` trims (-trimpath, so that a fresh clone reuses the build cache).
func ModuleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("no go.mod above " + wd)
		}
	}
}
