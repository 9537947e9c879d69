// Package payload renders a manifest the way the Cluster Version Operator does: one Go
// text/template named "manifest", parsed with no options and no extra functions, executed with
// a value of an unexported struct type. The package is named payload and the type
// manifestRenderConfig so that Go's error messages name the type as the CVO's do
// (`payload.manifestRenderConfig`).
package payload

import (
	"bytes"
	"text/template"
)

// manifestRenderConfig is the data a manifest template sees: the fields of the CVO's type of
// the same name, plus the image references minicvo exposes as Images.
type manifestRenderConfig struct {
	ReleaseImage   string
	ClusterProfile string
	Images         map[string]string
}

// Render parses text as the template "manifest" and executes it with the given data. The
// error is Go's own, unwrapped.
func Render(text, releaseImage, clusterProfile string, images map[string]string) (string, error) {
	if images == nil {
		images = map[string]string{}
	}
	config := manifestRenderConfig{
		ReleaseImage:   releaseImage,
		ClusterProfile: clusterProfile,
		Images:         images,
	}
	tmpl, err := template.New("manifest").Parse(text)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, config); err != nil {
		return "", err
	}
	return out.String(), nil
}
