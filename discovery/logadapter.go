package discovery

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"strings"
)

// slogWriter adapts the *log.Logger that serf and memberlist write to. Each
// line looks like "[WARN] memberlist: text"; the level prefix selects the
// slog level and the "memberlist:"/"serf:" prefix becomes the component.
// memberlist's [ERR] lines (failed probes, unreachable peers) are failures
// the gossip protocol recovers from, so they are logged at Warn.
type slogWriter struct {
	l *slog.Logger
}

func newGossipLogger(l *slog.Logger) *log.Logger {
	return log.New(&slogWriter{l: l}, "", 0)
}

func (w *slogWriter) Write(p []byte) (int, error) {
	n := len(p)
	for line := range bytes.SplitSeq(bytes.TrimRight(p, "\n"), []byte("\n")) {
		w.line(string(line))
	}
	return n, nil
}

func parseLogLine(s string) (slog.Level, string, string) {
	level := slog.LevelInfo
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "[") {
		if end := strings.IndexByte(s, ']'); end > 0 {
			switch s[1:end] {
			case "TRACE", "DEBUG":
				level = slog.LevelDebug
			case "INFO":
				level = slog.LevelInfo
			case "WARN", "WARNING", "ERR", "ERROR":
				level = slog.LevelWarn
			}
			s = strings.TrimSpace(s[end+1:])
		}
	}
	component := "gossip"
	for _, c := range []string{"memberlist", "serf"} {
		if rest, ok := strings.CutPrefix(s, c+":"); ok {
			component, s = c, strings.TrimSpace(rest)
			break
		}
	}
	if component == "serf" && s == "Shutdown without a Leave" {
		// Close is documented as leaving without a broadcast.
		level = slog.LevelInfo
	}
	return level, component, s
}

func (w *slogWriter) line(s string) {
	if s == "" {
		return
	}
	level, component, text := parseLogLine(s)
	if !w.l.Enabled(context.Background(), level) {
		return
	}
	w.l.LogAttrs(context.Background(), level, "gossip log", slog.String("component", component), slog.String("text", text))
}
