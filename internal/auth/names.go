package auth

import "strings"

// names turns the users a source names (a JWT's user claim, the gateway's header) into owner
// names, as config's "Owner names" describes: the owner the operator mapped the subject to,
// else the source's prefix and the subject (oidc:login.example.com:alice, gateway:alice).
type names struct {
	prefix string
	mapped map[string]string
}

// owner is the owner name of subject.
func (n names) owner(subject string) string {
	if o, ok := n.mapped[subject]; ok {
		return o
	}
	return n.prefix + subject
}

// gives reports whether the source gives owner now: a qualified name under its prefix, or
// a name one of its subjects is mapped to. A session opened for a name the source no longer
// gives (its name changed, a mapping was removed) must end.
func (n names) gives(owner string) bool {
	if subject, ok := strings.CutPrefix(owner, n.prefix); ok {
		_, mapped := n.mapped[subject]
		return validUser(subject) && !mapped
	}
	for _, o := range n.mapped {
		if o == owner {
			return true
		}
	}
	return false
}
