package spool_test

import (
	"encoding"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fastmq/fastmq/spool"
)

// sameStart tells two starts apart by what they mean: the same kind, offset
// and instant (a parsed time's location is not compared).
func sameStart(a, b spool.Start) bool {
	return a.Kind == b.Kind && a.Offset == b.Offset && a.Time.Equal(b.Time)
}

func TestParseStart(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	cases := []struct {
		in   string
		want spool.Start
		text string // String of the result
	}{
		{"", spool.Earliest(), "earliest"},
		{"earliest", spool.Earliest(), "earliest"},
		{"latest", spool.Latest(), "latest"},
		{"0", spool.AtOffset(0), "0"},
		{"1200", spool.AtOffset(1200), "1200"},
		{"007", spool.AtOffset(7), "7"},
		{"18446744073709551615", spool.AtOffset(1<<64 - 1), "18446744073709551615"},
		{"2026-01-02T15:04:05Z", spool.AtTime(at), "2026-01-02T15:04:05Z"},
		{"2026-01-02T15:04:05.25Z", spool.AtTime(at.Add(250 * time.Millisecond)), "2026-01-02T15:04:05.25Z"},
		{"2026-01-02T16:04:05+01:00", spool.AtTime(at), "2026-01-02T16:04:05+01:00"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := spool.ParseStart(tc.in)
			if err != nil || !sameStart(got, tc.want) {
				t.Fatalf("ParseStart(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
			if s := got.String(); s != tc.text {
				t.Fatalf("ParseStart(%q).String() = %q, want %q", tc.in, s, tc.text)
			}
			var viaText spool.Start
			if err := viaText.UnmarshalText([]byte(tc.in)); err != nil || !sameStart(viaText, tc.want) {
				t.Fatalf("UnmarshalText(%q) = %+v, %v", tc.in, viaText, err)
			}
		})
	}
	for _, bad := range []string{"yesterday", "Earliest", " latest", "-1", "+5", "1e3", "0x10", "18446744073709551616",
		"2026-01-02", "2026-01-02 15:04:05Z", "2026-13-02T15:04:05Z", "now"} {
		t.Run("bad/"+bad, func(t *testing.T) {
			got, err := spool.ParseStart(bad)
			if err == nil {
				t.Fatalf("ParseStart(%q) = %+v, want an error", bad, got)
			}
			if want := "want earliest, latest, an offset or an RFC 3339 time"; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), bad) {
				t.Fatalf("ParseStart(%q): error %q does not name the value and the forms", bad, err)
			}
		})
	}
}

func TestStartText(t *testing.T) {
	t.Parallel()
	// The flag packages take a Start through these two.
	var _ encoding.TextMarshaler = spool.Start{}
	var _ encoding.TextUnmarshaler = (*spool.Start)(nil)
	if _, err := (spool.Start{Kind: spool.StartTime + 1}).MarshalText(); err == nil {
		t.Fatal("MarshalText of an unknown kind: no error")
	}
	if s := (spool.Start{Kind: 9}).String(); s != "unknown(9)" {
		t.Fatalf("String of kind 9 = %q", s)
	}
	if (spool.Start{}) != spool.Earliest() {
		t.Fatal("the zero Start is not Earliest")
	}
	for k, want := range map[spool.StartKind]string{spool.StartEarliest: "earliest", spool.StartLatest: "latest",
		spool.StartOffset: "offset", spool.StartTime: "time", 7: "unknown"} {
		if k.String() != want {
			t.Errorf("StartKind(%d).String() = %q, want %q", k, k.String(), want)
		}
	}
}

// FuzzParseStart checks that ParseStart never panics, and that what it
// accepts reads back the same from String and MarshalText.
func FuzzParseStart(f *testing.F) {
	for _, s := range []string{"", "earliest", "latest", "42", "18446744073709551615", "2026-01-02T15:04:05.123456789+02:00",
		"0000-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "yesterday", "-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := spool.ParseStart(s)
		if err != nil {
			return
		}
		text, err := v.MarshalText()
		if err != nil {
			t.Fatalf("%q parsed to %+v, which does not marshal: %v", s, v, err)
		}
		if string(text) != v.String() {
			t.Fatalf("%q: MarshalText %q, String %q", s, text, v.String())
		}
		again, err := spool.ParseStart(string(text))
		if err != nil || !sameStart(again, v) {
			t.Fatalf("%q parsed to %+v, written %q, read back as %+v, %v", s, v, text, again, err)
		}
	})
}

// The command line's --from and --to: ParseStart reads what a user types,
// String writes it back.
func ExampleParseStart() {
	for _, s := range []string{"earliest", "latest", "1200", "2026-01-02T15:04:05Z", "yesterday"} {
		start, err := spool.ParseStart(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s: %s\n", start.Kind, start)
	}
	// Output:
	// earliest: earliest
	// latest: latest
	// offset: 1200
	// time: 2026-01-02T15:04:05Z
	// spool: start "yesterday": want earliest, latest, an offset or an RFC 3339 time
}
