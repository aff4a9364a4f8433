package discovery

import "testing"

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
		s, err := Config{NodeName: "x", Profile: tc.profile, BindAddr: tc.bind}.validate()
		if err != nil {
			t.Fatalf("%v on %q: %v", tc.profile, tc.bind, err)
		}
		if s.cfg.Profile != tc.want {
			t.Errorf("%v on %q: got %v, want %v", tc.profile, tc.bind, s.cfg.Profile, tc.want)
		}
	}
	// An empty BindAddr binds as the profile it resolves to.
	for p, want := range map[Profile]string{ProfileAuto: "0.0.0.0", ProfileLAN: "0.0.0.0", ProfileLocal: "127.0.0.1"} {
		s, err := Config{NodeName: "x", Profile: p}.validate()
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
