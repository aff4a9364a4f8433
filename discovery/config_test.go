package discovery

import (
	"errors"
	"testing"
)

// TestProfileAuto checks the timers the zero Profile stands for: local ones
// on a loopback bind address, LAN ones elsewhere and without one; an
// explicit profile is kept whatever the address.
func TestProfileAuto(t *testing.T) {
	for _, tc := range []struct {
		profile Profile
		bind    string
		want    Profile
	}{
		{ProfileAuto, "127.0.0.1:0", ProfileLocal},
		{ProfileAuto, "127.1.2.3:7946", ProfileLocal},
		{ProfileAuto, "localhost:7946", ProfileLocal},
		{ProfileAuto, "[::1]:0", ProfileLocal},
		{ProfileAuto, "", ProfileLAN},
		{ProfileAuto, "0.0.0.0:7946", ProfileLAN},
		{ProfileAuto, ":7946", ProfileLAN},
		{ProfileAuto, "10.0.0.5:7946", ProfileLAN},
		{ProfileAuto, "[::]:0", ProfileLAN},
		{ProfileLAN, "127.0.0.1:0", ProfileLAN},
		{ProfileLocal, "10.0.0.5:7946", ProfileLocal},
		{ProfileLocal, "", ProfileLocal},
	} {
		s, err := Config{NodeName: "x", Profile: tc.profile, BindAddr: tc.bind, AllowPlaintext: true}.validate()
		if err != nil {
			t.Fatalf("%v on %q: %v", tc.profile, tc.bind, err)
		}
		if s.cfg.Profile != tc.want {
			t.Errorf("%v on %q: got %v, want %v", tc.profile, tc.bind, s.cfg.Profile, tc.want)
		}
	}
	// An empty BindAddr binds as the profile it resolves to.
	for p, want := range map[Profile]string{ProfileAuto: "0.0.0.0", ProfileLAN: "0.0.0.0", ProfileLocal: "127.0.0.1"} {
		s, err := Config{NodeName: "x", Profile: p, AllowPlaintext: true}.validate()
		if err != nil {
			t.Fatal(err)
		}
		if s.bind != want {
			t.Errorf("%v without BindAddr binds %s, want %s", p, s.bind, want)
		}
	}
	if got := ProfileAuto.String(); got != "auto" {
		t.Errorf("ProfileAuto.String() = %q", got)
	}
}

// TestPlaintextRefused checks that gossip without a key binds only to
// loopback unless AllowPlaintext says otherwise, and that node names with
// control characters are refused.
func TestPlaintextRefused(t *testing.T) {
	key := make([]byte, 32)
	for _, tc := range []struct {
		cfg  Config
		want bool // accepted
	}{
		{Config{NodeName: "x", BindAddr: "127.0.0.1:0"}, true},
		{Config{NodeName: "x", BindAddr: "[::1]:0"}, true},
		{Config{NodeName: "x", BindAddr: "localhost:0"}, true},
		{Config{NodeName: "x", Profile: ProfileLocal}, true},
		{Config{NodeName: "x", BindAddr: "0.0.0.0:7946"}, false},
		{Config{NodeName: "x", BindAddr: "10.0.0.5:7946"}, false},
		{Config{NodeName: "x"}, false}, // binds 0.0.0.0:7946
		{Config{NodeName: "x", BindAddr: "10.0.0.5:7946", Key: key}, true},
		{Config{NodeName: "x", BindAddr: "10.0.0.5:7946", AllowPlaintext: true}, true},
		{Config{NodeName: "bad name", Profile: ProfileLocal}, false},
		{Config{NodeName: "bad\x00name", Profile: ProfileLocal}, false},
	} {
		_, err := tc.cfg.validate()
		if (err == nil) != tc.want {
			t.Errorf("%+v: err = %v, want accepted %v", tc.cfg, err, tc.want)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: err = %v, want ErrInvalid", tc.cfg, err)
		}
	}
}
