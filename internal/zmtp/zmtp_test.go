package zmtp

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"
)

func TestGreetingRoundTrip(t *testing.T) {
	for _, g := range []Greeting{
		{Major: 3, Minor: 0, Mechanism: "NULL"},
		{Major: 3, Minor: 1, Mechanism: "PLAIN", AsServer: true},
	} {
		b := g.Marshal()
		got, err := ParseGreeting(b[:])
		if err != nil || got != g {
			t.Fatalf("%+v -> %+v, %v", g, got, err)
		}
	}
	bad := Greeting{Major: 3, Mechanism: "NULL"}.Marshal()
	bad[10] = 2
	if _, err := ParseGreeting(bad[:]); !errors.Is(err, ErrVersion) {
		t.Fatalf("version 2: %v", err)
	}
	bad = Greeting{Major: 3, Mechanism: "NULL"}.Marshal()
	bad[0] = 'G'
	if _, err := ParseGreeting(bad[:]); !errors.Is(err, ErrGreeting) {
		t.Fatalf("bad signature: %v", err)
	}
	if _, err := ParseGreeting(bad[:10]); !errors.Is(err, ErrGreeting) {
		t.Fatalf("short: %v", err)
	}
}

func TestFrames(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, 0)
	big := bytes.Repeat([]byte("x"), 300)
	msgs := [][][]byte{{[]byte("a")}, {{}, []byte("b"), big}, {big}}
	for _, m := range msgs {
		if err := w.WriteMessage(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteCommand(CmdPing, AppendPing(nil, 12, []byte("ctx"))); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteCommand(CmdSubscribe, big); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMessage(nil); err == nil {
		t.Fatal("empty message written")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r := NewReader(&buf, 0)
	for _, want := range msgs {
		got, _, err := r.Next(nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("got %d frames, want %d", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("frame %d differs", i)
			}
		}
	}
	_, cmd, err := r.Next(nil)
	if err != nil || cmd.Name != CmdPing {
		t.Fatalf("%+v %v", cmd, err)
	}
	ttl, ctx, err := ParsePing(cmd.Body)
	if err != nil || ttl != 12 || string(ctx) != "ctx" {
		t.Fatalf("ping %d %q %v", ttl, ctx, err)
	}
	_, cmd, err = r.Next(nil)
	if err != nil || cmd.Name != CmdSubscribe || !bytes.Equal(cmd.Body, big) {
		t.Fatalf("subscribe %v", err)
	}
	if _, _, err := r.Next(nil); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

func TestReaderErrors(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		max  int64
		want error
	}{
		{"reserved", []byte{0x80, 0}, 0, ErrFrame},
		{"command-more", []byte{FlagCommand | FlagMore, 0}, 0, ErrFrame},
		{"command-in-message", []byte{FlagMore, 1, 'a', FlagCommand, 0}, 0, ErrFrame},
		{"too-large", []byte{FlagLong, 0x40, 0, 0, 0, 0, 0, 0, 0}, 1 << 20, ErrTooLarge},
		{"too-large-total", []byte{FlagMore, 3, 'a', 'b', 'c', 0, 3}, 5, ErrTooLarge},
		{"huge-command", []byte{FlagCommand | FlagLong, 0, 0, 0, 0, 0, 1, 0, 1}, 0, ErrTooLarge},
		{"max-uint64", []byte{FlagLong, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, -1, ErrTooLarge},
		{"truncated", []byte{FlagMore, 1, 'a', 0}, 0, io.ErrUnexpectedEOF},
		{"empty-command", []byte{FlagCommand, 0}, 0, ErrCommand},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(bytes.NewReader(tc.in), 0)
			r.MaxMsgSize = tc.max
			if _, _, err := r.Next(nil); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// Many empty frames: bounded by MaxFrames, not by size.
	r0 := NewReader(bytes.NewReader(bytes.Repeat([]byte{FlagMore, 0}, 100)), 0)
	r0.MaxFrames = 10
	if _, _, err := r0.Next(nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("frame flood: %v", err)
	}
	// Unlimited size and a lying length: fails at EOF without having
	// allocated the claimed size.
	r := NewReader(bytes.NewReader(append([]byte{FlagLong, 0x40, 0, 0, 0, 0, 0, 0, 0}, "abc"...)), 0)
	r.MaxMsgSize = -1
	if _, _, err := r.Next(nil); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("lying length: %v", err)
	}
}

func TestMetadataAndCommands(t *testing.T) {
	md := Metadata{{Name: "Socket-Type", Value: []byte("PUSH")}, {Name: "Identity", Value: nil}, {Name: "X-Foo", Value: bytes.Repeat([]byte("v"), 70000)}}
	b, err := AppendMetadata(nil, md)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseMetadata(b)
	if err != nil || len(got) != 3 {
		t.Fatalf("%v %v", got, err)
	}
	if v, ok := got.Get("socket-type"); !ok || string(v) != "PUSH" {
		t.Fatal("Get is not case-insensitive")
	}
	for _, bad := range [][]byte{{0}, {5, 'a'}, {1, 'a', 0, 0, 0, 5, 'x'}, {1, ' ', 0, 0, 0, 0}} {
		if _, err := ParseMetadata(bad); !errors.Is(err, ErrMetadata) {
			t.Fatalf("%q: %v", bad, err)
		}
	}
	h, err := AppendHello(nil, "user", "pw")
	if err != nil {
		t.Fatal(err)
	}
	if u, p, err := ParseHello(h); err != nil || u != "user" || p != "pw" {
		t.Fatalf("%q %q %v", u, p, err)
	}
	for _, bad := range [][]byte{{}, {5, 'a'}, {1, 'a', 2, 'b'}, {0, 0, 'x'}} {
		if _, _, err := ParseHello(bad); err == nil {
			t.Fatalf("HELLO %q accepted", bad)
		}
	}
	if r, err := ParseError(AppendError(nil, "nope")); err != nil || r != "nope" {
		t.Fatal(r, err)
	}
	if _, err := ParseError([]byte{9, 'a'}); err == nil {
		t.Fatal("bad ERROR accepted")
	}
	if _, _, err := ParsePing([]byte{1}); err == nil {
		t.Fatal("short PING accepted")
	}
	if _, _, err := ParsePing(make([]byte, 19)); err == nil {
		t.Fatal("PING with a 17-byte context accepted")
	}
	// libzmq 4.3's malformed ERROR is understood.
	cmd, err := ParseCommand([]byte("\x5eRROR\x03400"))
	if err != nil || cmd.Name != CmdError {
		t.Fatalf("%+v %v", cmd, err)
	}
}

// pair returns two ends of a loopback TCP connection.
func pair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	deadline := time.Now().Add(10 * time.Second)
	a.SetDeadline(deadline)
	b.SetDeadline(deadline)
	return a, b
}

func handshakeBoth(t *testing.T, ca, cb Config) (PeerInfo, error, PeerInfo, error) {
	a, b := pair(t)
	type res struct {
		info PeerInfo
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		info, err := Handshake(NewReader(b, 0), NewWriter(b, 0), cb)
		if err != nil {
			b.Close()
		}
		ch <- res{info, err}
	}()
	ia, ea := Handshake(NewReader(a, 0), NewWriter(a, 0), ca)
	if ea != nil {
		a.Close()
	}
	rb := <-ch
	return ia, ea, rb.info, rb.err
}

func TestHandshake(t *testing.T) {
	ia, ea, ib, eb := handshakeBoth(t, Config{SocketType: "DEALER", Identity: []byte("me")}, Config{SocketType: "ROUTER"})
	if ea != nil || eb != nil {
		t.Fatal(ea, eb)
	}
	if ia.SocketType != "ROUTER" || ib.SocketType != "DEALER" || string(ib.Identity) != "me" {
		t.Fatalf("%+v %+v", ia, ib)
	}
	auth := func(u, p string) bool { return u == "u" && p == "p" }
	_, ea, ib, eb = handshakeBoth(t, Config{SocketType: "REQ", Username: "u", Password: "p"}, Config{SocketType: "REP", Auth: auth})
	if ea != nil || eb != nil || ib.Username != "u" {
		t.Fatal(ea, eb, ib)
	}
	_, ea, _, eb = handshakeBoth(t, Config{SocketType: "REQ", Username: "u", Password: "x"}, Config{SocketType: "REP", Auth: auth})
	if !errors.Is(ea, ErrPeerError) || !errors.Is(eb, ErrAuth) {
		t.Fatal(ea, eb)
	}
	_, ea, _, eb = handshakeBoth(t, Config{SocketType: "REQ"}, Config{SocketType: "REP", Auth: auth})
	if !errors.Is(ea, ErrMechanism) || !errors.Is(eb, ErrMechanism) {
		t.Fatal(ea, eb)
	}
	_, ea, _, eb = handshakeBoth(t, Config{SocketType: "PUSH"}, Config{SocketType: "PUB"})
	if !errors.Is(ea, ErrSocketType) && !errors.Is(eb, ErrSocketType) {
		t.Fatal(ea, eb)
	}
	if !Compatible("SUB", "XPUB") || Compatible("PUSH", "PUSH") || Compatible("BOGUS", "PAIR") {
		t.Fatal("compatibility table")
	}
}

// byteFeeder hands out one byte per Read, so that every prefix of a stream
// is seen as the buffered state at some point.
type byteFeeder struct{ b []byte }

func (f *byteFeeder) Read(p []byte) (int, error) {
	if len(f.b) == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = f.b[0]
	f.b = f.b[1:]
	return 1, nil
}

func TestCompleteAndSharedBodies(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, 0)
	msgs := [][][]byte{
		{[]byte("a")},
		{[]byte("bb"), {}, bytes.Repeat([]byte("c"), 300)},
		{bytes.Repeat([]byte("d"), 5000)},
		{[]byte("e")},
	}
	for _, m := range msgs {
		if err := w.WriteMessage(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteCommand(CmdPing, []byte{0, 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	stream := buf.Bytes()

	// Complete must be false on every strict prefix of a unit and true
	// once the unit is whole.
	var ends []int
	r := NewReader(bytes.NewReader(stream), 0)
	for {
		_, _, err := r.Next(nil)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, len(stream)-r.Buffered())
	}
	if len(ends) != len(msgs)+1 {
		t.Fatalf("%d units, want %d", len(ends), len(msgs)+1)
	}
	start := 0
	for _, end := range ends {
		for n := start; n <= end; n++ {
			r := NewReader(bytes.NewReader(stream[start:n]), 0)
			_ = r.fill(n - start) // fill the buffer
			if got, want := r.Complete(), n == end; got != want {
				t.Fatalf("unit [%d,%d), %d bytes buffered: Complete=%v, want %v", start, end, n-start, got, want)
			}
		}
		start = end
	}

	// Bodies may share a block, but each is capped: appending to one
	// must not change the next.
	r = NewReader(&byteFeeder{b: stream}, 0)
	var got [][][]byte
	for range msgs {
		f, _, err := r.Next(nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f)
	}
	for _, f := range got {
		for _, b := range f {
			_ = append(b, 'X')
		}
	}
	for i, m := range msgs {
		if len(got[i]) != len(m) {
			t.Fatalf("message %d: %d frames, want %d", i, len(got[i]), len(m))
		}
		for j := range m {
			if !bytes.Equal(got[i][j], m[j]) || got[i][j] == nil {
				t.Fatalf("message %d frame %d: %q, want %q", i, j, got[i][j], m[j])
			}
		}
	}
}

// chunkFeeder hands out the stream in reads of the sizes it cycles
// through.
type chunkFeeder struct {
	b     []byte
	sizes []int
	i     int
}

func (f *chunkFeeder) Read(p []byte) (int, error) {
	if len(f.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(f.b), f.sizes[f.i%len(f.sizes)])
	f.i++
	copy(p, f.b[:n])
	f.b = f.b[n:]
	return n, nil
}

// roundTrip encodes messages of the given frame sizes, decodes them through
// reads of the given chunk sizes with the given block size, and checks
// every frame at the end: bodies are slices of blocks, so any reuse of a
// block would show up as a changed earlier frame.
func roundTrip(t testing.TB, frameSizes []int, chunks []int, block int) {
	var msgs [][][]byte
	var stream bytes.Buffer
	w := NewWriter(&stream, 0)
	fill := byte(1)
	for i := 0; i < len(frameSizes); {
		nf := 1 + frameSizes[i]%3
		var m [][]byte
		for j := 0; j < nf && i < len(frameSizes); j++ {
			m = append(m, bytes.Repeat([]byte{fill}, frameSizes[i]))
			fill++
			i++
		}
		msgs = append(msgs, m)
		if err := w.WriteMessage(m); err != nil {
			t.Fatal(err)
		}
		if len(msgs)%5 == 0 {
			if err := w.WriteCommand(CmdPing, AppendPing(nil, uint16(len(msgs)), []byte("ctx"))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r := NewReader(&chunkFeeder{b: stream.Bytes(), sizes: chunks}, block)
	var got [][][]byte
	var pings int
	for {
		f, cmd, err := r.Next(nil)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d messages: %v", len(got), err)
		}
		if f == nil {
			if cmd.Name != CmdPing {
				t.Fatalf("command %q", cmd.Name)
			}
			pings++
			continue
		}
		got = append(got, f)
	}
	if len(got) != len(msgs) || pings != len(msgs)/5 {
		t.Fatalf("%d messages and %d pings, want %d and %d", len(got), pings, len(msgs), len(msgs)/5)
	}
	for i, m := range msgs {
		if len(got[i]) != len(m) {
			t.Fatalf("message %d: %d frames, want %d", i, len(got[i]), len(m))
		}
		for j := range m {
			if !bytes.Equal(got[i][j], m[j]) {
				t.Fatalf("message %d frame %d (%d bytes) changed or wrong", i, j, len(m[j]))
			}
			if len(m[j]) <= sliceMax && cap(got[i][j]) != len(got[i][j]) {
				t.Fatalf("message %d frame %d: cap %d > len %d", i, j, cap(got[i][j]), len(got[i][j]))
			}
		}
	}
}

func TestReaderBlocksNeverReused(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var sizes []int
	for range 600 {
		switch k := rng.IntN(20); {
		case k < 7:
			sizes = append(sizes, rng.IntN(300))
		case k < 13:
			sizes = append(sizes, rng.IntN(sliceMax+2))
		case k < 19:
			sizes = append(sizes, sliceMax-8+rng.IntN(16))
		default: // past chunk: read in several allocations
			sizes = append(sizes, rng.IntN(3*chunk/2))
		}
	}
	// Tiny reads get frames of at most a few blocks: megabytes fed a few
	// bytes at a time only cost time.
	var small []int
	for _, n := range sizes {
		small = append(small, n%(2*sliceMax+3))
	}
	for _, tc := range []struct {
		chunks []int
		block  int
		sizes  []int
	}{
		{[]int{1 << 30}, 0, sizes},
		{[]int{1, 7, 4096, 65536, 3, 100000}, 0, sizes},
		{[]int{13, 1, 2}, 16, small},
		{[]int{5000, 70000, 9}, 4096, sizes},
	} {
		roundTrip(t, tc.sizes, tc.chunks, tc.block)
	}
}

func FuzzReaderRoundTrip(f *testing.F) {
	f.Add([]byte{1, 200, 255, 0, 3}, []byte{1, 2, 3}, uint16(16))
	f.Add([]byte{0, 0, 0}, []byte{255}, uint16(0))
	f.Fuzz(func(t *testing.T, sizes, chunks []byte, block uint16) {
		if len(sizes) == 0 || len(sizes) > 64 {
			return
		}
		fs := make([]int, len(sizes))
		for i, s := range sizes {
			fs[i] = int(s) * int(s) / 4 // up to about 16 KiB: both paths
		}
		cs := []int{1 << 20}
		if len(chunks) > 0 {
			cs = cs[:0]
			for _, c := range chunks {
				cs = append(cs, 1+int(c)*int(c))
			}
		}
		roundTrip(t, fs, cs, int(block))
	})
}

// failAfter accepts n bytes, then fails every write.
type failAfter struct {
	n     int
	calls int
}

var errDisk = errors.New("write failed")

func (f *failAfter) Write(p []byte) (int, error) {
	f.calls++
	if len(p) > f.n {
		k := f.n
		f.n = 0
		return k, errDisk
	}
	f.n -= len(p)
	return len(p), nil
}

// TestWriterErrorsStick: after a failed write, every call reports the
// error and nothing more reaches the stream.
func TestWriterErrorsStick(t *testing.T) {
	for _, body := range [][]byte{bytes.Repeat([]byte("s"), 100), bytes.Repeat([]byte("L"), 5000)} {
		f := &failAfter{n: 700}
		w := NewWriter(f, 512)
		var err error
		for i := 0; i < 100 && err == nil; i++ {
			err = w.WriteMessage([][]byte{body})
		}
		if err == nil {
			err = w.Flush()
		}
		if !errors.Is(err, errDisk) {
			t.Fatalf("%d-byte frames: error %v, want %v", len(body), err, errDisk)
		}
		calls := f.calls
		if err := w.WriteMessage([][]byte{body}); !errors.Is(err, errDisk) {
			t.Fatalf("write after the failure: %v", err)
		}
		if err := w.WriteCommand(CmdPing, nil); !errors.Is(err, errDisk) {
			t.Fatalf("command after the failure: %v", err)
		}
		if err := w.Flush(); !errors.Is(err, errDisk) {
			t.Fatalf("flush after the failure: %v", err)
		}
		if f.calls != calls {
			t.Fatalf("%d writes reached the stream after the failure", f.calls-calls)
		}
	}
}

// TestWriterLargeFramesOverConn sends frames larger than the buffer over a
// real connection (a gathered write of buffer and body) between small
// ones, and reads them back in order.
func TestWriterLargeFramesOverConn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sizes := []int{10, 600, 70000, 3, 1 << 20, 511, 512, 513, 0, 200000}
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		w := NewWriter(c, 512)
		for i, n := range sizes {
			if err := w.WriteMessage([][]byte{bytes.Repeat([]byte{byte(i)}, n)}); err != nil {
				done <- err
				return
			}
		}
		done <- w.Flush()
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := NewReader(c, 0)
	for i, n := range sizes {
		f, _, err := r.Next(nil)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if len(f) != 1 || !bytes.Equal(f[0], bytes.Repeat([]byte{byte(i)}, n)) {
			t.Fatalf("frame %d (%d bytes) wrong", i, n)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// shortWriter accepts at most 3 bytes per call and reports no error.
type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return min(len(p), 3), nil }

// zeroReader returns no bytes and no error for ever.
type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

// TestWriterShortWrite: a stream that takes fewer bytes than given without
// saying why fails the Writer with io.ErrShortWrite, on both paths.
func TestWriterShortWrite(t *testing.T) {
	for _, n := range []int{10, 5000} {
		w := NewWriter(shortWriter{}, 512)
		err := w.WriteMessage([][]byte{bytes.Repeat([]byte("x"), n)})
		if err == nil {
			err = w.Flush()
		}
		if !errors.Is(err, io.ErrShortWrite) {
			t.Fatalf("%d-byte frame: %v, want io.ErrShortWrite", n, err)
		}
	}
}

// TestReaderNoProgress: a stream that never returns data nor an error
// fails with io.ErrNoProgress, for small and large bodies alike.
func TestReaderNoProgress(t *testing.T) {
	for _, n := range []int{10, 100000} {
		head := appendHeader(nil, 0, n)
		r := NewReader(io.MultiReader(bytes.NewReader(head), zeroReader{}), 0)
		if _, _, err := r.Next(nil); !errors.Is(err, io.ErrNoProgress) {
			t.Fatalf("%d-byte body: %v, want io.ErrNoProgress", n, err)
		}
	}
}
