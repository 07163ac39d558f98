// Package validate checks rendered Kubernetes manifests offline, the way an API server
// would read them: every document is decoded strictly (unknown or duplicate fields are
// errors) into the Go types of one Kubernetes release (k8s.io/api) and of the Prometheus
// Operator (monitoring.coreos.com/v1), then checked for what those types cannot express
// (names, selectors, port references).
//
// go.mod pins the newest k8s.io/api; k8s-1.28.mod pins Kubernetes 1.28's:
//
//	go test ./...                        # newest
//	go test -modfile=k8s-1.28.mod ./...  # Kubernetes 1.28
//
// ND_MANIFESTS (a space-separated list of files) names what to check; by default the
// committed plain manifests, ../kubernetes/*.yaml.
package validate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// newDecoder decodes YAML or JSON into the registered types, refusing unknown and
// duplicate fields.
func newDecoder() (runtime.Decoder, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, rbacv1.AddToScheme, monitoringv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer(), nil
}

// documents splits a multi-document YAML stream, dropping empty documents.
func documents(data []byte) ([][]byte, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
}

func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}

// Decode decodes every document of data strictly; errors name the document.
func Decode(data []byte) ([]runtime.Object, error) {
	decoder, err := newDecoder()
	if err != nil {
		return nil, err
	}
	docs, err := documents(data)
	if err != nil {
		return nil, err
	}
	var objects []runtime.Object
	var problems []string
	for i, doc := range docs {
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			what := fmt.Sprintf("document %d", i+1)
			if gvk != nil {
				what += " (" + gvk.String() + ")"
			}
			problems = append(problems, what+": "+err.Error())
			continue
		}
		objects = append(objects, obj)
	}
	if len(problems) > 0 {
		return objects, errors.New(strings.Join(problems, "\n"))
	}
	return objects, nil
}

func manifests(t *testing.T) []string {
	if list := strings.Fields(os.Getenv("ND_MANIFESTS")); len(list) > 0 {
		return list
	}
	files, err := filepath.Glob("../kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in ../kubernetes (%v)", err)
	}
	return files
}

func TestManifestsDecodeStrictly(t *testing.T) {
	for _, file := range manifests(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			objects, err := Decode(data)
			if err != nil {
				t.Fatalf("%s:\n%v", file, err)
			}
			if len(objects) == 0 {
				t.Fatalf("%s holds no object", file)
			}
			for _, problem := range Check(objects) {
				t.Errorf("%s: %s", file, problem)
			}
			kinds := map[string]int{}
			for _, o := range objects {
				kinds[o.GetObjectKind().GroupVersionKind().Kind]++
			}
			t.Logf("%s: %v", file, kinds)
		})
	}
}

// The decoder is strict: a misspelt field, a field at the wrong level and a duplicate
// field are errors, not silently dropped (what `kubectl apply` would do client-side).
func TestDecoderRefusesWhatTheAPIServerWould(t *testing.T) {
	base := "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: x\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec:\n"
	good := base + "      hostNetwork: true\n      containers: [{name: c, image: i}]\n"
	if _, err := Decode([]byte(good)); err != nil {
		t.Fatalf("a valid DaemonSet was refused: %v", err)
	}
	for name, doc := range map[string]string{
		"misspelt":     base + "      hostNetwrok: true\n      containers: [{name: c, image: i}]\n",
		"wrong-level":  base + "      containers: [{name: c, image: i, hostNetwork: true}]\n",
		"duplicate":    base + "      hostNetwork: true\n      hostNetwork: false\n      containers: [{name: c, image: i}]\n",
		"wrong-type":   base + "      hostNetwork: \"yes\"\n      containers: [{name: c, image: i}]\n",
		"unknown-kind": "apiVersion: apps/v1\nkind: DaemonSett\nmetadata: {name: x}\n",
	} {
		if _, err := Decode([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
