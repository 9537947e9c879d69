// Runs `oc adm upgrade` (no arguments, or --include-not-recommended) against a fake
// clientset holding the ClusterVersion in the JSON file given, and prints what oc wrote to
// stdout and stderr. A test aid for minicvo's `status` wording.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	configv1 "github.com/openshift/api/config/v1"
	fakeconfig "github.com/openshift/client-go/config/clientset/versioned/fake"
	"github.com/openshift/oc/pkg/cli/admin/upgrade"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func main() {
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		panic(err)
	}
	var cv configv1.ClusterVersion
	if err := json.Unmarshal(data, &cv); err != nil {
		panic(err)
	}
	var out, errb bytes.Buffer
	o := upgrade.NewOptions(genericiooptions.IOStreams{Out: &out, ErrOut: &errb})
	o.Client = fakeconfig.NewSimpleClientset(&cv)
	o.IncludeNotRecommended = len(os.Args) > 2
	if err := o.Run(); err != nil {
		fmt.Fprintf(&errb, "error: %v\n", err)
	}
	os.WriteFile(os.Args[1]+".stdout", out.Bytes(), 0o644)
	os.WriteFile(os.Args[1]+".stderr", errb.Bytes(), 0o644)
}
