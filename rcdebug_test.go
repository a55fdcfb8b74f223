package llmrelay_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRCDebug(t *testing.T) {
	logf := startRelay(t, rcRelay, rcSite)
	for _, model := range []string{"native", "via-chat"} {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "POST", relayBase+"/v1/responses", strings.NewReader(`{"model":"`+model+`","input":"hi x","background":true}`))
		req.Header.Set("Authorization", "Bearer sk-rc-a")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Logf("%s: %v", model, err)
		} else {
			b, _ := io.ReadAll(resp.Body)
			t.Logf("%s: %d %s", model, resp.StatusCode, b)
		}
		cancel()
	}
	time.Sleep(time.Second)
	t.Log(readLog(t, logf))
}
