package sheet

import (
	"errors"
	"io"
)

// errOverBudget: the parts of a workbook decompressed to more than MaxUncompressed.
var errOverBudget = errors.New("the workbook expands to more than the uncompressed size limit")

// budget counts the bytes decompressed in one pass over a workbook, across all the parts
// read, and stops the pass at the limit. Declared sizes are not trusted: this is what is
// actually read.
type budget struct {
	left int64
}

func newBudget(limit int64) *budget { return &budget{left: limit} }

// reader wraps one zip entry's decompressed stream.
func (b *budget) reader(r io.Reader) io.Reader { return &budgetReader{r: r, b: b} }

type budgetReader struct {
	r io.Reader
	b *budget
}

func (br *budgetReader) Read(p []byte) (int, error) {
	if br.b.left <= 0 {
		// Tell a clean end from an overflow: the stream may have exactly used the budget up.
		var one [1]byte
		if n, err := br.r.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, errOverBudget
	}
	if int64(len(p)) > br.b.left {
		p = p[:br.b.left]
	}
	n, err := br.r.Read(p)
	br.b.left -= int64(n)
	return n, err
}
