package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// applyEnv walks cfg and, for every leaf field, looks up the environment variable named after
// its YAML path (see Config). Map entries are walked for the keys already present, so a queue
// or type defined in the file or the defaults can be tuned from the environment.
func applyEnv(cfg *Config, prefix string, getenv func(string) string) error {
	return walkEnv(reflect.ValueOf(cfg).Elem(), prefix, getenv)
}

// envDecoder is implemented by fields with their own environment syntax.
type envDecoder interface{ DecodeEnv(string) error }

var envDecoderType = reflect.TypeFor[envDecoder]()

func walkEnv(v reflect.Value, name string, getenv func(string) string) error {
	if reflect.PointerTo(v.Type()).Implements(envDecoderType) {
		if s := getenv(name); s != "" {
			if err := v.Addr().Interface().(envDecoder).DecodeEnv(s); err != nil {
				return fmt.Errorf("environment %s: %w", name, err)
			}
		}
		return nil
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			if err := walkEnv(v.Field(i), name+"_"+envName(tag), getenv); err != nil {
				return err
			}
		}
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			elem := reflect.New(v.Type().Elem()).Elem()
			elem.Set(v.MapIndex(k))
			if err := walkEnv(elem, name+"_"+envName(k.String()), getenv); err != nil {
				return err
			}
			v.SetMapIndex(k, elem)
		}
	default:
		s := getenv(name)
		if s == "" {
			return nil
		}
		if err := setScalar(v, s); err != nil {
			return fmt.Errorf("environment %s=%q: %w", name, s, err)
		}
	}
	return nil
}

func setScalar(v reflect.Value, s string) error {
	switch {
	case v.Type() == reflect.TypeFor[time.Duration]():
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("want a duration such as 30s or 5m")
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		v.SetBool(b)
	case v.CanInt():
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("want a whole number")
		}
		v.SetInt(n)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		var items []string
		for item := range strings.SplitSeq(s, ",") {
			if item = strings.TrimSpace(item); item != "" {
				items = append(items, item)
			}
		}
		v.Set(reflect.ValueOf(items))
	default:
		return fmt.Errorf("cannot be set from the environment")
	}
	return nil
}

// envName turns a YAML key into its environment form: "export:customers" → "EXPORT_CUSTOMERS".
func envName(key string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.ToUpper(r)
		}
		return '_'
	}, key)
}
