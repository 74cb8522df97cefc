package memlimit

import (
	"io/fs"
	"testing"
)

func TestSoftMemoryLimitIsNinetyPercentOfTheContainers(t *testing.T) {
	files := []string{"v2", "v1"}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"cgroup v2 limit", map[string]string{"v2": "536870912\n"}, 483183820},
		{"cgroup v2 without a limit", map[string]string{"v2": "max\n", "v1": "536870912\n"}, 0},
		{"cgroup v1 limit", map[string]string{"v1": "1073741824\n"}, 966367641},
		{"cgroup v1 without a limit", map[string]string{"v1": "9223372036854771712\n"}, 0},
		{"no cgroup files", map[string]string{}, 0},
		{"garbage", map[string]string{"v2": "lots"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := func(path string) ([]byte, error) {
				if s, ok := tc.files[path]; ok {
					return []byte(s), nil
				}
				return nil, fs.ErrNotExist
			}
			if got := softMemoryLimit(read, files); got != tc.want {
				t.Fatalf("softMemoryLimit = %d, want %d", got, tc.want)
			}
		})
	}
}
