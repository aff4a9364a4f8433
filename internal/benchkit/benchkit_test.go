package benchkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// childEnv makes the test binary act as a measuring child: "report"
// reports, "mute" exits without a report, "wrong" never says ready.
const childEnv = "BENCHKIT_TEST_CHILD"

type testReport struct {
	Processed int     `json:"processed"`
	LatNs     []int64 `json:"lat_ns"`
}

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "report":
		Ready(os.Stdout)
		WaitForStop()
		json.NewEncoder(os.Stdout).Encode(testReport{Processed: 3, LatNs: []int64{1, 2, 3}})
	case "mute":
		Ready(os.Stdout)
		WaitForStop()
	case "wrong":
		fmt.Println("not ready")
	}
	os.Exit(0)
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		v    []float64
		want float64
	}{
		{nil, 0},
		{[]float64{7}, 7},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{5, 5, 1, 9, 5}, 5},
	} {
		in := slices.Clone(c.v)
		if got := Median(c.v); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.v, got, c.want)
		}
		if !slices.Equal(in, c.v) {
			t.Errorf("Median modified its input: %v", c.v)
		}
	}
}

func TestPercentile(t *testing.T) {
	v := make([]int64, 101) // 0..100: index = value
	for i := range v {
		v[i] = int64(i)
	}
	for _, c := range []struct {
		p    float64
		want int64
	}{{0, 0}, {0.5, 50}, {0.9, 90}, {0.99, 99}, {1, 100}, {-1, 0}, {2, 100}} {
		if got := Percentile(v, c.p); got != c.want {
			t.Errorf("Percentile(0..100, %v) = %d, want %d", c.p, got, c.want)
		}
	}
	// Index ⌊p·(n−1)⌋: of 10 values, p99 is the 9th (index 8), not the max.
	d := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if got := Percentile(d, 0.99); got != 9 {
		t.Errorf("p99 of 1..10 = %v, want 9", got)
	}
	if got := Percentile([]float64(nil), 0.5); got != 0 {
		t.Errorf("Percentile of nothing = %v", got)
	}
}

func TestSpreadAndAlternate(t *testing.T) {
	s := SpreadOf([]float64{1.5, 0.5, 1, 2, 1.25})
	if s != (Spread{Median: 1.25, Min: 0.5, Max: 2}) || s.String() != "1.25 (min 0.50, max 2.00)" {
		t.Errorf("SpreadOf: %+v %q", s, s)
	}
	impls := []string{"fastmq", "jetstream"}
	if got := Alternate(impls, 0); !slices.Equal(got, impls) {
		t.Errorf("round 0: %v", got)
	}
	if got := Alternate(impls, 3); !slices.Equal(got, []string{"jetstream", "fastmq"}) || impls[0] != "fastmq" {
		t.Errorf("round 3: %v (input %v)", got, impls)
	}
}

// A /proc/stat of a 2-CPU virtual machine.
const procStat = `cpu  10132153 290696 3084719 46828483 16683 0 25195 175628 0 0
cpu0 1393280 32966 572056 13366730 5941 0 10567 88164 0 0
intr 199292 0 0
`

func TestParseCPU(t *testing.T) {
	got := parseCPU(procStat)
	want := CPUTimes{Total: 10132153 + 290696 + 3084719 + 46828483 + 16683 + 25195 + 175628, Idle: 46828483, IOWait: 16683, Steal: 175628}
	if got != want {
		t.Fatalf("parseCPU = %+v, want %+v", got, want)
	}
	for _, bad := range []string{"", "intr 1 2\n", "cpu 1 2 3\n", "cpu 1 2 3 x 5 6 7 8\n"} {
		if got := parseCPU(bad); got != (CPUTimes{}) {
			t.Errorf("parseCPU(%q) = %+v", bad, got)
		}
	}
	a := CPUTimes{Total: 1000, Idle: 500, IOWait: 10, Steal: 20}
	b := CPUTimes{Total: 2000, Idle: 900, IOWait: 60, Steal: 120}
	if s, ok := b.Since(a); !ok || s != (Share{Steal: 10, IOWait: 5, Idle: 40}) {
		t.Errorf("Since: %+v %v", s, ok)
	}
	if got := b.Noise(a); got != "  (steal 10.0 %, iowait 5.0 %, idle 40 %)" {
		t.Errorf("Noise: %q", got)
	}
	if got := a.Noise(a); got != "" {
		t.Errorf("Noise over no time: %q", got)
	}
	if got := b.Noise(CPUTimes{}); got == "" {
		t.Error("Noise from boot: empty")
	}
	if r := ReadCPU(); r == (CPUTimes{}) {
		if _, err := os.Stat("/proc/stat"); err == nil {
			t.Error("ReadCPU read nothing from this machine's /proc/stat")
		}
	}
}

func TestParseIOCalls(t *testing.T) {
	io := "rchar: 323934931\nwchar: 323929600\nsyscr: 632687\nsyscw: 632675\nread_bytes: 0\n"
	if got := parseIOCalls(io); got != 632687+632675 {
		t.Errorf("parseIOCalls = %d", got)
	}
	if got := parseIOCalls("nothing"); got != 0 {
		t.Errorf("parseIOCalls(nothing) = %d", got)
	}
	if strings.Count(LoadAvg(), " ") != 2 && LoadAvg() != "unknown" {
		t.Errorf("LoadAvg = %q", LoadAvg())
	}
}

func child(t *testing.T, mode string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	return cmd
}

// TestChild runs real child processes: one that reports, one that ends
// without a report, one that never says ready; every one is reaped.
func TestChild(t *testing.T) {
	c, err := StartChild[testReport](child(t, "report"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := c.Report()
	if err != nil || rep.Processed != 3 || !slices.Equal(rep.LatNs, []int64{1, 2, 3}) {
		t.Fatalf("Report = %+v, %v", rep, err)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if err := c.Wait(); err != nil {
		t.Fatalf("second Wait: %v", err)
	}

	mute, err := StartChild[testReport](child(t, "mute"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mute.Report(); !errors.Is(err, ErrNoReport) {
		t.Errorf("Report of a mute child: %v", err)
	}
	mute.Wait()

	cmd := child(t, "wrong")
	if _, err := StartChild[testReport](cmd); err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Errorf("StartChild of a child that is not ready: %v", err)
	}
	if cmd.ProcessState == nil {
		t.Error("the child that was not ready was not reaped")
	}
}
