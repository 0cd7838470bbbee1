package checks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// scaledObject is KEDA's ScaledObject (keda.sh/v1alpha1), the fields we
// use: KEDA's Go module would pull a controller runtime into this module,
// so the manifest is decoded into this local copy with unknown fields
// refused (a misspelt field fails the test; a field KEDA has and this copy
// lacks must be added here).
type scaledObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace,omitempty"`
		Labels    map[string]string `json:"labels,omitempty"`
	} `json:"metadata"`
	Spec struct {
		ScaleTargetRef struct {
			Name string `json:"name"`
		} `json:"scaleTargetRef"`
		MinReplicaCount *int32 `json:"minReplicaCount,omitempty"`
		MaxReplicaCount *int32 `json:"maxReplicaCount,omitempty"`
		PollingInterval *int32 `json:"pollingInterval,omitempty"`
		CooldownPeriod  *int32 `json:"cooldownPeriod,omitempty"`
		Advanced        *struct {
			HorizontalPodAutoscalerConfig *struct {
				Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
			} `json:"horizontalPodAutoscalerConfig,omitempty"`
		} `json:"advanced,omitempty"`
		Triggers []struct {
			Type     string            `json:"type"`
			Metadata map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

// decodeStrict decodes one manifest into the upstream type of its kind
// (sigs.k8s.io/yaml strict: unknown and duplicate fields are errors).
func decodeStrict(doc []byte) (any, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return nil, err
	}
	var obj any
	switch head.APIVersion + " " + head.Kind {
	case "apps/v1 Deployment":
		obj = &appsv1.Deployment{}
	case "v1 ConfigMap":
		obj = &corev1.ConfigMap{}
	case "v1 Secret":
		obj = &corev1.Secret{}
	case "v1 Service":
		obj = &corev1.Service{}
	case "policy/v1 PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	case "autoscaling/v2 HorizontalPodAutoscaler":
		obj = &autoscalingv2.HorizontalPodAutoscaler{}
	case "keda.sh/v1alpha1 ScaledObject":
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		so := &scaledObject{}
		dec := json.NewDecoder(bytes.NewReader(j))
		dec.DisallowUnknownFields()
		return so, dec.Decode(so)
	default:
		return nil, fmt.Errorf("unexpected kind %s %s", head.APIVersion, head.Kind)
	}
	return obj, yaml.UnmarshalStrict(doc, obj)
}

func splitDocs(b []byte) [][]byte {
	var out [][]byte
	for _, d := range strings.Split(string(b), "\n---\n") {
		if strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(d), "---")) != "" {
			out = append(out, []byte(d))
		}
	}
	return out
}

// TestK8sManifestsDecodeStrictly decodes every manifest file under
// deployments/k8s (but the kustomization files) into its upstream type.
func TestK8sManifestsDecodeStrictly(t *testing.T) {
	root := filepath.Join(repoRoot(t), "deployments", "k8s")
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") || d.Name() == "kustomization.yaml" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, doc := range splitDocs(b) {
			if _, err := decodeStrict(doc); err != nil {
				t.Errorf("%s document %d: %v", path, i, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// drainTimeout is the fetcher's --drain-timeout default (the longest
// drain of the services).
const drainTimeoutSeconds = 5

// TestK8sOverlaysRender renders the base and each overlay with kustomize's
// own API (krusty), decodes every resulting resource strictly and checks
// what the README promises: probes on the admin server, resources set,
// a grace period longer than the drain, a PDB for each group member,
// autoscaling bounded by the partition count.
func TestK8sOverlaysRender(t *testing.T) {
	root := filepath.Join(repoRoot(t), "deployments", "k8s")
	for _, dir := range []string{"base", "overlays/small", "overlays/large"} {
		t.Run(dir, func(t *testing.T) {
			k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
			rm, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(root, dir))
			if err != nil {
				t.Fatalf("kustomize build: %v", err)
			}
			deployments := map[string]*appsv1.Deployment{}
			pdbs := map[string]bool{}
			var scaled []*scaledObject
			var cm *corev1.ConfigMap
			for _, r := range rm.Resources() {
				doc, err := r.AsYAML()
				if err != nil {
					t.Fatal(err)
				}
				obj, err := decodeStrict(doc)
				if err != nil {
					t.Fatalf("%s %s: %v", r.GetKind(), r.GetName(), err)
				}
				switch o := obj.(type) {
				case *appsv1.Deployment:
					deployments[o.Name] = o
				case *policyv1.PodDisruptionBudget:
					pdbs[o.Name] = true
				case *scaledObject:
					scaled = append(scaled, o)
				case *corev1.ConfigMap:
					cm = o
				}
			}
			if cm == nil {
				t.Fatal("no ConfigMap")
			}
			partitions, err := strconv.Atoi(cm.Data["CRAWLER_KAFKA_PARTITIONS"])
			if err != nil {
				t.Fatalf("CRAWLER_KAFKA_PARTITIONS: %v", err)
			}
			for _, name := range []string{"scheduler", "fetcher", "parser", "proxypool", "seeder"} {
				d, ok := deployments[name]
				if !ok {
					t.Errorf("no Deployment %s", name)
					continue
				}
				ps := d.Spec.Template.Spec
				if g := ps.TerminationGracePeriodSeconds; g == nil || *g <= drainTimeoutSeconds {
					t.Errorf("%s: terminationGracePeriodSeconds %v, want > %d", name, g, drainTimeoutSeconds)
				}
				c := ps.Containers[0]
				if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.ReadinessProbe.HTTPGet.Port.String() != "admin" {
					t.Errorf("%s: readiness probe %+v, want /readyz on admin", name, c.ReadinessProbe)
				}
				if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
					t.Errorf("%s: liveness probe %+v, want /healthz", name, c.LivenessProbe)
				}
				if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
					t.Errorf("%s: memory request and limit required", name)
				}
				var memLimit int64
				for _, e := range c.Env {
					if e.Name == "CRAWLER_MEMORY_LIMIT" {
						memLimit, _ = strconv.ParseInt(e.Value, 10, 64)
					}
				}
				if lim := c.Resources.Limits.Memory().Value(); memLimit <= 0 || memLimit >= lim {
					t.Errorf("%s: CRAWLER_MEMORY_LIMIT %d must be below the container limit %d", name, memLimit, lim)
				}
				if len(c.EnvFrom) != 2 {
					t.Errorf("%s: want the ConfigMap and the Secret as envFrom", name)
				}
			}
			for _, name := range []string{"scheduler", "fetcher", "parser"} {
				if !pdbs[name] {
					t.Errorf("no PodDisruptionBudget for %s", name)
				}
			}
			if len(scaled) != 2 {
				t.Errorf("want ScaledObjects for fetcher and parser, got %d", len(scaled))
			}
			for _, so := range scaled {
				if so.Spec.MaxReplicaCount == nil || int(*so.Spec.MaxReplicaCount) > partitions {
					t.Errorf("ScaledObject %s: maxReplicaCount %v above %d partitions", so.Metadata.Name, so.Spec.MaxReplicaCount, partitions)
				}
				if _, ok := deployments[so.Spec.ScaleTargetRef.Name]; !ok {
					t.Errorf("ScaledObject %s scales unknown %s", so.Metadata.Name, so.Spec.ScaleTargetRef.Name)
				}
				if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "kafka" {
					t.Errorf("ScaledObject %s: want one kafka trigger", so.Metadata.Name)
				}
			}
		})
	}
}
