// Package httpload is the closed-loop HTTP client the viewer benchmarks
// share (test/bench/viewerload, the bench's gitsite scenario): a number of
// connections each sending the next request as soon as the last one's body
// is read, and the latencies of all of them.
package httpload

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Get fetches u and reads its whole body; a status other than 200 is an error.
func Get(client *http.Client, u string) ([]byte, error) {
	resp, err := client.Get(u)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return body, err
}

// Load sends requests for paths, in turn, from concurrency connections for
// d, and returns every request's latency (the whole body read).
func Load(client *http.Client, base string, paths []string, d time.Duration, concurrency int) ([]time.Duration, error) {
	deadline := time.Now().Add(d)
	var (
		mu    sync.Mutex
		all   []time.Duration
		first error
		wg    sync.WaitGroup
	)
	for w := range concurrency {
		wg.Go(func() {
			var mine []time.Duration
			for i := w; time.Now().Before(deadline); i++ {
				start := time.Now()
				if _, err := Get(client, base+paths[i%len(paths)]); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if first == nil && len(all) == 0 {
		first = errors.New("no request completed")
	}
	return all, first
}

// Percentile is the p-th percentile (nearest rank) of lat.
func Percentile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
