package group

import (
	"regexp"
	"testing"
)

// nameSyntax is the name syntax as the docs give it.
var nameSyntax = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)

func TestValidNameMatchesTheSyntax(t *testing.T) {
	for _, s := range []string{"", "a", "_", "0", ".", "-", "a.b-c_d", ".a", "-a", "a/b", "a b", "é", "a\x00",
		string(make([]byte, 129)), "x" + string(make([]byte, 0)) + "y"} {
		if got, want := validName(s), nameSyntax.MatchString(s); got != want {
			t.Errorf("validName(%q) = %v, want %v", s, got, want)
		}
	}
	long := make([]byte, 130)
	for i := range long {
		long[i] = 'a'
	}
	for n := 126; n <= 130; n++ {
		if got, want := validName(string(long[:n])), nameSyntax.MatchString(string(long[:n])); got != want {
			t.Errorf("validName of %d letters = %v, want %v", n, got, want)
		}
	}
}

func FuzzValidName(f *testing.F) {
	f.Add("orders.eu-1")
	f.Add("-x")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validName(s), nameSyntax.MatchString(s); got != want {
			t.Fatalf("validName(%q) = %v, the syntax says %v", s, got, want)
		}
	})
}
