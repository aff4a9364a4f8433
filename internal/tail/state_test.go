package tail

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func sampleState() []pathState {
	return []pathState{
		{path: "/var/log/app.log", files: []filePos{
			{id: fileID{dev: 2049, ino: 131}, off: 4096, fpLen: 256, fpCRC: 0x12345678},
			{id: fileID{dev: 2049, ino: 140}, off: 12, fpLen: 12, fpCRC: 7},
		}},
		{path: "missing.log", files: []filePos{}},
	}
}

func TestStateRoundTrip(t *testing.T) {
	t.Parallel()
	want := sampleState()
	got, err := decodeState(encodeState(want))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got  %+v\n want %+v", got, want)
	}
}

func TestStateDecodeErrors(t *testing.T) {
	t.Parallel()
	good := encodeState(sampleState())
	nl := bytes.IndexByte(good, '\n')
	flip := bytes.Clone(good)
	flip[len(flip)-5] ^= 1
	cases := map[string][]byte{
		"empty":         nil,
		"no header":     []byte("{}"),
		"bad magic":     append([]byte("other-state 1 2 00000000\n"), "{}"...),
		"short body":    good[:len(good)-1],
		"long body":     append(bytes.Clone(good), ' '),
		"bad checksum":  flip,
		"bad length":    append([]byte("fastmq-tail-state 1 x 00000000\n"), good[nl+1:]...),
		"huge":          make([]byte, maxStateBytes+1),
		"unknown field": encodeRaw(`{"paths":[],"extra":1}`),
		"negative off":  encodeRaw(`{"paths":[{"path":"a","files":[{"offset":-1}]}]}`),
		"empty path":    encodeRaw(`{"paths":[{"path":"","files":[]}]}`),
		"dup path":      encodeRaw(`{"paths":[{"path":"a","files":[]},{"path":"a","files":[]}]}`),
		"bad fp len":    encodeRaw(`{"paths":[{"path":"a","files":[{"offset":1,"fp_len":999}]}]}`),
		"trailing":      encodeRaw(`{"paths":[]} {}`),
		"not object":    encodeRaw(`[1,2]`),
		"too many":      encodeRaw(`{"paths":[{"path":"a","files":[` + strings.Repeat(`{},`, maxFilesPerPath) + `{}]}]}`),
	}
	for name, data := range cases {
		if _, err := decodeState(data); !errors.Is(err, ErrCorruptState) {
			t.Errorf("%s: %v, want ErrCorruptState", name, err)
		}
	}
	v2 := bytes.Replace(good, []byte("fastmq-tail-state 1 "), []byte("fastmq-tail-state 2 "), 1)
	if _, err := decodeState(v2); !errors.Is(err, ErrStateVersion) {
		t.Errorf("version 2: %v, want ErrStateVersion", err)
	}
}

// encodeRaw wraps a JSON body in a valid header.
func encodeRaw(body string) []byte {
	b := []byte(body + "\n")
	return append([]byte(headerFor(b)), b...)
}

func FuzzDecodeState(f *testing.F) {
	f.Add(encodeState(sampleState()), false)
	f.Add(encodeState(nil), false)
	f.Add([]byte(`{"paths":[{"path":"a","files":[{"dev":1,"ino":2,"offset":3}]}]}`), true)
	f.Add([]byte(`{"paths":[{"path":"a\u0000","files":[{"fp_len":-1}]}]}`), true)
	f.Add([]byte("fastmq-tail-state 1 3 00000000\n{}\n"), false)
	f.Add([]byte("garbage"), false)
	f.Fuzz(func(t *testing.T, data []byte, withHeader bool) {
		if withHeader { // let the fuzzer reach the JSON validation
			data = append([]byte(headerFor(data)), data...)
		}
		ps, err := decodeState(data)
		if err != nil {
			if !errors.Is(err, ErrCorruptState) && !errors.Is(err, ErrStateVersion) {
				t.Fatalf("error %v wraps neither sentinel", err)
			}
			return
		}
		again, err := decodeState(encodeState(ps))
		if err != nil {
			t.Fatalf("re-decode of a decoded state: %v", err)
		}
		if !reflect.DeepEqual(again, ps) {
			t.Fatalf("round trip changed the state")
		}
	})
}

// FuzzNextLine checks the line splitter: pieces never exceed the limit,
// and the pieces plus the removed terminators give back the input.
func FuzzNextLine(f *testing.F) {
	f.Add([]byte("a\nb\r\nc"), 4)
	f.Add([]byte("abcdefghij\r\n"), 10)
	f.Add([]byte("\r\n\n\r"), 1)
	f.Add([]byte(strings.Repeat("x", 100)+"\n"), 7)
	f.Fuzz(func(t *testing.T, data []byte, maxLine int) {
		if maxLine < 1 || maxLine > 1<<16 {
			return
		}
		fr := &fileReader{buf: data, w: len(data)}
		var rebuilt []byte
		for i := 0; i <= len(data); i++ {
			text, consumed, split, ok := fr.nextLine(maxLine)
			if !ok {
				break
			}
			if len(text) > maxLine || consumed <= 0 || consumed > fr.w-fr.r {
				t.Fatalf("bad piece: %d bytes, consumed %d", len(text), consumed)
			}
			raw := data[fr.r : fr.r+consumed]
			if !bytes.HasPrefix(raw, text) {
				t.Fatalf("text is not a prefix of the consumed bytes")
			}
			rest := string(raw[len(text):])
			if split && rest != "" || !split && rest != "\n" && rest != "\r\n" {
				t.Fatalf("split %v with terminator %q", split, rest)
			}
			rebuilt = append(rebuilt, raw...)
			fr.r += consumed
		}
		if !bytes.Equal(rebuilt, data[:fr.r]) {
			t.Fatalf("pieces do not rebuild the input")
		}
		if rem := fr.w - fr.r; bytes.IndexByte(data[fr.r:], '\n') >= 0 || rem >= maxLine+2 {
			t.Fatalf("complete line left behind: %q", data[fr.r:])
		}
	})
}

// FuzzNewWithState checks that New survives any state file: it either
// starts (falling back to no saved positions for an unusable file) or
// returns an error, and never panics.
func FuzzNewWithState(f *testing.F) {
	// In the JSON, @P stands for the followed path, @D and @I for the
	// device and inode of the file at it, and @R for a rotated file.
	f.Add([]byte(`{"paths":[{"path":"@P","files":[{"dev":@D,"ino":@I,"offset":4,"fp_len":3,"fp_crc":9}]}]}`), true)
	f.Add([]byte(`{"paths":[{"path":"@P","files":[{"dev":@D,"ino":@R,"offset":2},{"dev":@D,"ino":@I,"offset":99999999999}]}]}`), true)
	f.Add([]byte(`{"paths":[{"path":"@P","files":[{"dev":@D,"ino":@R,"offset":3,"fp_len":8,"fp_crc":1},{"dev":@D,"ino":@I,"offset":4}]}]}`), true)
	f.Add([]byte("garbage"), false)
	f.Fuzz(func(t *testing.T, data []byte, withHeader bool) {
		dir := t.TempDir()
		p := filepath.Join(dir, "app.log")
		if err := os.WriteFile(p+".1", []byte("old\nlines\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("one\ntwo\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		var ids [2]fileID
		for i, name := range []string{p, p + ".1"} {
			fi, err := os.Stat(name)
			if err != nil {
				t.Fatal(err)
			}
			ids[i], _, _ = identify(fi)
		}
		data = bytes.ReplaceAll(data, []byte("@P"), []byte(p))
		data = bytes.ReplaceAll(data, []byte("@D"), []byte(fmt.Sprint(ids[0].dev)))
		data = bytes.ReplaceAll(data, []byte("@I"), []byte(fmt.Sprint(ids[0].ino)))
		data = bytes.ReplaceAll(data, []byte("@R"), []byte(fmt.Sprint(ids[1].ino)))
		if withHeader {
			data = append([]byte(headerFor(data)), data...)
		}
		state := filepath.Join(dir, "state")
		if err := os.WriteFile(state, data, 0o644); err != nil {
			t.Fatal(err)
		}
		tl, err := New(Config{Paths: []string{p}, StateFile: state})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		defer tl.Close()
		if lerr := tl.LoadError(); lerr != nil {
			var se *StateError
			if !errors.As(lerr, &se) {
				t.Fatalf("LoadError %v is not a *StateError", lerr)
			}
		}
		for _, pos := range tl.Positions() {
			if pos.Offset < 0 || pos.Offset > 10 {
				t.Fatalf("position %+v outside the file", pos)
			}
		}
	})
}
