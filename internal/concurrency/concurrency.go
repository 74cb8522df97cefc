// Package concurrency parses the manager's --max-concurrent-reconciles:
// "N" for every controller and "name=N" for one, e.g. "2,markdownview=4".
// No Kubernetes imports, so its fuzz target builds in seconds.
package concurrency

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Flag is the parsed value. A bare N sets Default for every controller;
// without one, the entries of Defaults that the value does not name stay in
// PerController.
type Flag struct {
	Default       int
	PerController map[string]int
	// Defaults are the controllers whose default differs from Default's.
	Defaults map[string]int
}

// String prints the value so that Set reads it back: names sorted.
func (c *Flag) String() string {
	if c == nil {
		return ""
	}
	parts := []string{strconv.Itoa(c.Default)}
	names := make([]string, 0, len(c.PerController))
	for name := range c.PerController {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s=%d", name, c.PerController[name]))
	}
	return strings.Join(parts, ",")
}

// Set parses v (flag.Value).
func (c *Flag) Set(v string) error {
	per, everyController := map[string]int{}, false
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, num, named := strings.Cut(item, "=")
		if !named {
			num = name
		}
		n, err := strconv.Atoi(strings.TrimSpace(num))
		if err != nil {
			return fmt.Errorf("%q: want N or name=N", item)
		}
		if named {
			per[strings.TrimSpace(name)] = n
		} else {
			c.Default, everyController = n, true
		}
	}
	if !everyController {
		for name, n := range c.Defaults {
			if _, set := per[name]; !set {
				per[name] = n
			}
		}
	}
	c.PerController = per
	return nil
}
