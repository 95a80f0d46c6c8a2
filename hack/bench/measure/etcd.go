package measure

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// etcdKV writes and reads keys of the control plane's etcd through its
// gRPC gateway (JSON over plain HTTP on loopback: etcd serves it on its
// client URL), so that the benchmarks need no etcd client library.
type etcdKV struct {
	url string
	hc  *http.Client
}

// etcdTxnOps is how many puts one transaction carries: etcd's default
// --max-txn-ops.
const etcdTxnOps = 128

type etcdKeyValue struct {
	Key   string `json:"key"`
	Value string `json:"value,omitempty"`
}

// post sends body to the gateway's path and decodes the answer into out.
func (e *etcdKV) post(ctx context.Context, path string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(e.url, "/")+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err = io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", path, resp.Status, bytes.TrimSpace(data))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// put writes kvs (at most etcdTxnOps) in one transaction.
func (e *etcdKV) put(ctx context.Context, kvs [][2][]byte) error {
	type put struct {
		RequestPut etcdKeyValue `json:"requestPut"`
	}
	ops := make([]put, len(kvs))
	for i, kv := range kvs {
		ops[i].RequestPut = etcdKeyValue{Key: base64.StdEncoding.EncodeToString(kv[0]), Value: base64.StdEncoding.EncodeToString(kv[1])}
	}
	return e.post(ctx, "/v3/kv/txn", map[string]any{"success": ops}, nil)
}

// keysWithSuffix returns the keys under prefix that end with suffix, and
// their values.
func (e *etcdKV) keysWithSuffix(ctx context.Context, prefix, suffix string) (map[string][]byte, error) {
	// range_end is the prefix with its last byte incremented.
	end := []byte(prefix)
	end[len(end)-1]++
	var out struct {
		Kvs []etcdKeyValue `json:"kvs"`
	}
	if err := e.post(ctx, "/v3/kv/range", map[string]any{
		"key":       base64.StdEncoding.EncodeToString([]byte(prefix)),
		"range_end": base64.StdEncoding.EncodeToString(end),
	}, &out); err != nil {
		return nil, err
	}
	found := map[string][]byte{}
	for _, kv := range out.Kvs {
		k, err := base64.StdEncoding.DecodeString(kv.Key)
		if err != nil {
			return nil, err
		}
		if !strings.HasSuffix(string(k), suffix) {
			continue
		}
		v, err := base64.StdEncoding.DecodeString(kv.Value)
		if err != nil {
			return nil, err
		}
		found[string(k)] = v
	}
	return found, nil
}
