package testenv

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// Table gets path (e.g. /apis/tenancy.trellis.dev/v1/tenants) as the Table
// kubectl get asks for, and returns each row's cells by column name, with
// each column's priority (1: shown with -o wide only).
func Table(cfg *rest.Config, path string) (rows []map[string]any, priority map[string]int32, err error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "application/json;as=Table;g=meta.k8s.io;v=v1")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	table := &metav1.Table{}
	if err := json.Unmarshal(body, table); err != nil {
		return nil, nil, err
	}
	priority = map[string]int32{}
	for _, c := range table.ColumnDefinitions {
		priority[c.Name] = c.Priority
	}
	for _, r := range table.Rows {
		cells := map[string]any{}
		for i, c := range table.ColumnDefinitions {
			cells[c.Name] = r.Cells[i]
		}
		rows = append(rows, cells)
	}
	return rows, priority, nil
}
