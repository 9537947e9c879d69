// Command gotemplate renders template cases with Go's text/template exactly as the Cluster
// Version Operator renders the files of a payload's manifests/ directory, so that minicvo's
// renderer can be compared with it (tests/it/template_go.rs).
//
// Input on stdin, a JSON array of cases:
//
//	[{"name": "...", "text": "...", "data": {"releaseImage": "...", "clusterProfile": "...",
//	  "images": {"name": "pull spec"}}}]
//
// Output on stdout, one JSON array of results in the same order, each {"name", "output"} when
// the template renders or {"name", "error"} with Go's error text when it does not.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"minicvo/hack/tools/gotemplate/payload"
)

type data struct {
	ReleaseImage   string            `json:"releaseImage"`
	ClusterProfile string            `json:"clusterProfile"`
	Images         map[string]string `json:"images"`
}

type testCase struct {
	Name string `json:"name"`
	Text string `json:"text"`
	Data data   `json:"data"`
}

type result struct {
	Name   string  `json:"name"`
	Output *string `json:"output,omitempty"`
	Error  *string `json:"error,omitempty"`
}

func main() {
	var cases []testCase
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		fmt.Fprintf(os.Stderr, "gotemplate: reading cases from stdin: %v\n", err)
		os.Exit(2)
	}
	results := make([]result, 0, len(cases))
	for _, c := range cases {
		out, err := payload.Render(c.Text, c.Data.ReleaseImage, c.Data.ClusterProfile, c.Data.Images)
		r := result{Name: c.Name}
		if err != nil {
			msg := err.Error()
			r.Error = &msg
		} else {
			r.Output = &out
		}
		results = append(results, r)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(results); err != nil {
		fmt.Fprintf(os.Stderr, "gotemplate: writing results: %v\n", err)
		os.Exit(1)
	}
}
