package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/rest"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// tableAccept asks the API server for a Table (the CRD's printer columns), as kubectl get does.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

// printControlPlaneEtcds prints every ControlPlaneEtcd exactly as
// `kubectl get controlplaneetcds -A` shows them: the API server renders the rows from the CRD's
// printer columns, and kubectl's table printer lays them out.
func printControlPlaneEtcds(ctx context.Context, cfg *rest.Config, w io.Writer) error {
	table, err := getTable(ctx, cfg, "/apis/"+v1alpha1.GroupVersion.String()+"/controlplaneetcds")
	if err != nil {
		return err
	}
	return printers.NewTablePrinter(printers.PrintOptions{WithNamespace: true}).PrintObj(table, w)
}

func getTable(ctx context.Context, cfg *rest.Config, path string) (*metav1.Table, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create an HTTP client for %s: %w", cfg.Host, err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("failed to parse the API server URL %q: %w", cfg.Host, err)
	}
	u = u.JoinPath(path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("failed to build the request for %s: %w", path, err)
	}
	req.Header.Set("Accept", tableAccept)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("failed to get %s: %w", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("failed to get %s: %s: %s", path, resp.Status, body)
	}
	table := &metav1.Table{}
	if err := json.Unmarshal(body, table); err != nil {
		return nil, fmt.Errorf("failed to decode the Table of %s: %w", path, err)
	}
	if table.Kind != "Table" {
		return nil, fmt.Errorf("failed to get %s as a Table: the API server answered with kind %q", path, table.Kind)
	}
	// The printer reads each row's namespace from its object's metadata (the API server sends it
	// by default, includeObject=Metadata); kubectl's decoder does this step for kubectl.
	for i := range table.Rows {
		obj := &metav1.PartialObjectMetadata{}
		if raw := table.Rows[i].Object.Raw; len(raw) > 0 {
			if err := json.Unmarshal(raw, obj); err != nil {
				return nil, fmt.Errorf("failed to decode row %d of %s: %w", i, path, err)
			}
			table.Rows[i].Object.Object = obj
		}
	}
	return table, nil
}
