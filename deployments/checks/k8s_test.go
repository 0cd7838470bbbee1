package checks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
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

// kedaMeta is the metadata of the KEDA resources, the fields we use.
type kedaMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// scaledObject is KEDA's ScaledObject (keda.sh/v1alpha1), the fields we
// use: KEDA's Go module would pull a controller runtime into this module,
// so the manifest is decoded into this local copy with unknown fields
// refused (a misspelt field fails the test; a field KEDA has and this copy
// lacks must be added here).
type scaledObject struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   kedaMeta `json:"metadata"`
	Spec       struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion,omitempty"`
			Kind       string `json:"kind,omitempty"` // KEDA's default: Deployment
			Name       string `json:"name"`
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
			Type              string            `json:"type"`
			Metadata          map[string]string `json:"metadata"`
			AuthenticationRef *struct {
				Name string `json:"name"`
				Kind string `json:"kind,omitempty"` // TriggerAuthentication (default) or ClusterTriggerAuthentication
			} `json:"authenticationRef,omitempty"`
		} `json:"triggers"`
	} `json:"spec"`
}

// triggerAuthentication is KEDA's TriggerAuthentication (keda.sh/v1alpha1),
// the fields we use, decoded as strictly as scaledObject.
type triggerAuthentication struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   kedaMeta `json:"metadata"`
	Spec       struct {
		SecretTargetRef []struct {
			Parameter string `json:"parameter"`
			Name      string `json:"name"`
			Key       string `json:"key"`
		} `json:"secretTargetRef"`
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
	case "apps/v1 StatefulSet":
		obj = &appsv1.StatefulSet{}
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
		return decodeLocal(doc, &scaledObject{})
	case "keda.sh/v1alpha1 TriggerAuthentication":
		return decodeLocal(doc, &triggerAuthentication{})
	default:
		return nil, fmt.Errorf("unexpected kind %s %s", head.APIVersion, head.Kind)
	}
	return obj, yaml.UnmarshalStrict(doc, obj)
}

// decodeLocal decodes doc into one of the local copies of KEDA's types,
// refusing unknown fields.
func decodeLocal[T any](doc []byte, obj *T) (*T, error) {
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	return obj, dec.Decode(obj)
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

// services are the Deployments (the fetcher a StatefulSet with
// components/warc) of the base, every one a Kafka client.
var services = []string{"scheduler", "fetcher", "parser", "proxypool", "seeder"}

// k8sTree is deployments/k8s read into memory: each variant renders from
// its own in-memory copy, with components added to an overlay's
// kustomization as the README tells operators to.
type k8sTree map[string][]byte

const k8sRoot = "/k8s"

func readK8sTree(t *testing.T) k8sTree {
	t.Helper()
	root := filepath.Join(repoRoot(t), "deployments", "k8s")
	tree := k8sTree{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		tree[path.Join(k8sRoot, filepath.ToSlash(rel))] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// render builds dir (relative to deployments/k8s) with kustomize's own API
// (krusty), after adding components to its kustomization and applying
// edit to the files (nil: none; the tests of the checks break a manifest
// with it), and decodes every resource strictly.
func (tree k8sTree) render(t *testing.T, dir string, components []string, edit func(k8sTree)) *rendered {
	t.Helper()
	files := k8sTree{}
	for p, b := range tree {
		files[p] = slices.Clone(b)
	}
	kpath := path.Join(k8sRoot, dir, "kustomization.yaml")
	if len(components) > 0 {
		var k map[string]any
		if err := yaml.Unmarshal(files[kpath], &k); err != nil {
			t.Fatalf("%s: %v", kpath, err)
		}
		var cs []any
		for _, c := range components {
			cs = append(cs, "../../components/"+c)
		}
		k["components"] = cs
		b, err := yaml.Marshal(k)
		if err != nil {
			t.Fatal(err)
		}
		files[kpath] = b
	}
	if edit != nil {
		edit(files)
	}
	fs := filesys.MakeFsInMemory()
	for p, b := range files {
		if err := fs.WriteFile(p, b); err != nil {
			t.Fatal(err)
		}
	}
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, path.Join(k8sRoot, dir))
	if err != nil {
		t.Fatalf("kustomize build %s with %v: %v", dir, components, err)
	}
	r := &rendered{
		workloads:    map[string]*workload{},
		pdbs:         map[string]bool{},
		secrets:      map[string]*corev1.Secret{},
		configMaps:   map[string]*corev1.ConfigMap{},
		triggerAuths: map[string]*triggerAuthentication{},
	}
	for _, res := range rm.Resources() {
		doc, err := res.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		obj, err := decodeStrict(doc)
		if err != nil {
			t.Fatalf("%s %s: %v", res.GetKind(), res.GetName(), err)
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			r.workloads[o.Name] = &workload{kind: "Deployment", pod: &o.Spec.Template.Spec}
		case *appsv1.StatefulSet:
			r.workloads[o.Name] = &workload{kind: "StatefulSet", pod: &o.Spec.Template.Spec, claims: o.Spec.VolumeClaimTemplates}
		case *policyv1.PodDisruptionBudget:
			r.pdbs[o.Name] = true
		case *scaledObject:
			r.scaled = append(r.scaled, o)
		case *triggerAuthentication:
			r.triggerAuths[o.Metadata.Name] = o
		case *corev1.ConfigMap:
			r.configMaps[o.Name] = o
		case *corev1.Secret:
			r.secrets[o.Name] = o
		}
	}
	return r
}

// rendered is one kustomize build, decoded. Names are unique within it
// (one namespace).
type rendered struct {
	workloads    map[string]*workload
	pdbs         map[string]bool
	scaled       []*scaledObject
	triggerAuths map[string]*triggerAuthentication
	secrets      map[string]*corev1.Secret
	configMaps   map[string]*corev1.ConfigMap
}

// workload is a Deployment or a StatefulSet.
type workload struct {
	kind   string
	pod    *corev1.PodSpec
	claims []corev1.PersistentVolumeClaim // a StatefulSet's volumeClaimTemplates
}

// secretValue is key of the Secret name ("", false: no such Secret or key).
func (r *rendered) secretValue(name, key string) (string, bool) {
	s, ok := r.secrets[name]
	if !ok {
		return "", false
	}
	if v, ok := s.StringData[key]; ok {
		return v, true
	}
	v, ok := s.Data[key]
	return string(v), ok
}

// envSource is a variable's value (from a literal, a ConfigMap or a
// Secret) and whether it is set at all.
type envSource struct {
	value string
	set   bool
}

// env resolves the variable name of container c as the kubelet does: env
// over envFrom, the last of duplicates.
func (r *rendered) env(c *corev1.Container, name string) envSource {
	for i := len(c.Env) - 1; i >= 0; i-- {
		e := c.Env[i]
		if e.Name != name {
			continue
		}
		switch {
		case e.ValueFrom == nil:
			return envSource{value: e.Value, set: true}
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			v, _ := r.secretValue(ref.Name, ref.Key)
			return envSource{value: v, set: true}
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			if cm, ok := r.configMaps[ref.Name]; ok {
				return envSource{value: cm.Data[ref.Key], set: true}
			}
			return envSource{set: true}
		default:
			return envSource{set: true} // a field reference
		}
	}
	for i := len(c.EnvFrom) - 1; i >= 0; i-- {
		ef := c.EnvFrom[i]
		key := strings.TrimPrefix(name, ef.Prefix)
		if ef.ConfigMapRef != nil {
			if cm, ok := r.configMaps[ef.ConfigMapRef.Name]; ok {
				if v, ok := cm.Data[key]; ok {
					return envSource{value: v, set: true}
				}
			}
		}
		if ef.SecretRef != nil {
			if v, ok := r.secretValue(ef.SecretRef.Name, key); ok {
				return envSource{value: v, set: true}
			}
		}
	}
	return envSource{}
}

// mountFor is the volume mount of c under which file lies (the deepest),
// and the file's path relative to it.
func mountFor(c *corev1.Container, file string) (*corev1.VolumeMount, string) {
	var best *corev1.VolumeMount
	var rel string
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		r, err := filepath.Rel(m.MountPath, file)
		if err != nil || r == ".." || strings.HasPrefix(r, "../") {
			continue
		}
		if best == nil || len(m.MountPath) > len(best.MountPath) {
			best, rel = m, r
		}
	}
	return best, rel
}

// secretFile is the Secret and key that file is, in pod p's container c:
// a key of a Secret volume mounted above it, which must exist.
func (r *rendered) secretFile(p *corev1.PodSpec, c *corev1.Container, file string) (secret, key string, err error) {
	m, rel := mountFor(c, file)
	if m == nil {
		return "", "", fmt.Errorf("%s is on no volume", file)
	}
	for _, v := range p.Volumes {
		if v.Name != m.Name {
			continue
		}
		if v.Secret == nil {
			return "", "", fmt.Errorf("%s: volume %s is not a Secret", file, v.Name)
		}
		key = rel
		if len(v.Secret.Items) > 0 {
			key = ""
			for _, it := range v.Secret.Items {
				if it.Path == rel {
					key = it.Key
				}
			}
		}
		if _, ok := r.secretValue(v.Secret.SecretName, key); key == "" || !ok {
			return "", "", fmt.Errorf("%s: no such key in Secret %s", file, v.Secret.SecretName)
		}
		return v.Secret.SecretName, key, nil
	}
	return "", "", fmt.Errorf("%s: volume %s of the mount is not in the pod", file, m.Name)
}

// checkServices checks what the README promises: probes on the admin
// server, resources set, a grace period longer than the drain, a PDB for
// each group member, autoscaling bounded by the partition count and
// aimed at the workload that exists.
func (r *rendered) checkServices() []string {
	var bad []string
	cm, ok := r.configMaps["trawl-config"]
	if !ok {
		return []string{"no ConfigMap trawl-config"}
	}
	partitions, err := strconv.Atoi(cm.Data["CRAWLER_KAFKA_PARTITIONS"])
	if err != nil {
		bad = append(bad, fmt.Sprintf("CRAWLER_KAFKA_PARTITIONS: %v", err))
	}
	for _, name := range services {
		w, ok := r.workloads[name]
		if !ok {
			bad = append(bad, "no Deployment or StatefulSet "+name)
			continue
		}
		ps := w.pod
		if g := ps.TerminationGracePeriodSeconds; g == nil || *g <= drainTimeoutSeconds {
			bad = append(bad, fmt.Sprintf("%s: terminationGracePeriodSeconds %v, want > %d", name, g, drainTimeoutSeconds))
		}
		c := &ps.Containers[0]
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.ReadinessProbe.HTTPGet.Port.String() != "admin" {
			bad = append(bad, fmt.Sprintf("%s: readiness probe %+v, want /readyz on admin", name, c.ReadinessProbe))
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
			bad = append(bad, fmt.Sprintf("%s: liveness probe %+v, want /healthz", name, c.LivenessProbe))
		}
		if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			bad = append(bad, name+": memory request and limit required")
		}
		memLimit, _ := strconv.ParseInt(r.env(c, "CRAWLER_MEMORY_LIMIT").value, 10, 64)
		if lim := c.Resources.Limits.Memory().Value(); memLimit <= 0 || memLimit >= lim {
			bad = append(bad, fmt.Sprintf("%s: CRAWLER_MEMORY_LIMIT %d must be below the container limit %d", name, memLimit, lim))
		}
		if len(c.EnvFrom) != 2 {
			bad = append(bad, name+": want the ConfigMap and the Secret as envFrom")
		}
	}
	for _, name := range []string{"scheduler", "fetcher", "parser"} {
		if !r.pdbs[name] {
			bad = append(bad, "no PodDisruptionBudget for "+name)
		}
	}
	if len(r.scaled) != 2 {
		bad = append(bad, fmt.Sprintf("want ScaledObjects for fetcher and parser, got %d", len(r.scaled)))
	}
	for _, so := range r.scaled {
		if so.Spec.MaxReplicaCount == nil || int(*so.Spec.MaxReplicaCount) > partitions {
			bad = append(bad, fmt.Sprintf("ScaledObject %s: maxReplicaCount %v above %d partitions", so.Metadata.Name, so.Spec.MaxReplicaCount, partitions))
		}
		ref := so.Spec.ScaleTargetRef
		kind := ref.Kind
		if kind == "" {
			kind = "Deployment"
		}
		if w, ok := r.workloads[ref.Name]; !ok || w.kind != kind || (ref.APIVersion != "" && ref.APIVersion != "apps/v1") {
			bad = append(bad, fmt.Sprintf("ScaledObject %s scales %s %s %s, which is not in the build", so.Metadata.Name, ref.APIVersion, kind, ref.Name))
		}
		if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "kafka" {
			bad = append(bad, fmt.Sprintf("ScaledObject %s: want one kafka trigger", so.Metadata.Name))
		}
	}
	return bad
}

// k8sVariants are the overlays and the sets of components the README
// documents (kafka-auth-ca and kafka-auth-client-cert come after
// kafka-auth), each built and checked.
var k8sVariants = func() (vs []struct {
	dir        string
	components []string
},
) {
	auth := [][]string{
		nil,
		{"kafka-auth"},
		{"kafka-auth", "kafka-auth-ca"},
		{"kafka-auth", "kafka-auth-client-cert"},
		{"kafka-auth", "kafka-auth-ca", "kafka-auth-client-cert"},
	}
	for _, dir := range []string{"overlays/small", "overlays/large"} {
		for _, a := range auth {
			for _, extra := range [][]string{nil, {"warc"}, {"render"}, {"warc", "render"}, {"render", "warc"}} {
				vs = append(vs, struct {
					dir        string
					components []string
				}{dir, append(slices.Clone(a), extra...)})
			}
		}
	}
	return vs
}()

// TestK8sOverlaysRender renders the base, each overlay and each overlay
// with each documented set of components, and checks the services
// (checkServices), that KEDA and the services reach Kafka with the same
// credentials (checkKafkaAuth), that no two fetchers share a WARC
// directory (checkWARC) and that rendering fetchers have Chromium, its
// volumes and its memory (checkRender).
func TestK8sOverlaysRender(t *testing.T) {
	tree := readK8sTree(t)
	t.Run("base", func(t *testing.T) {
		r := tree.render(t, "base", nil, nil)
		report(t, r.checkServices(), r.checkKafkaAuth(), r.checkWARC(), r.checkRender())
	})
	for _, v := range k8sVariants {
		t.Run(strings.Join(append([]string{v.dir}, v.components...), "+"), func(t *testing.T) {
			r := tree.render(t, v.dir, v.components, nil)
			report(t, r.checkServices(), r.checkKafkaAuth(), r.checkWARC(), r.checkRender())
			if slices.Contains(v.components, "kafka-auth") {
				for _, so := range r.scaled {
					for _, tr := range so.Spec.Triggers {
						if tr.AuthenticationRef == nil {
							t.Errorf("ScaledObject %s: a kafka trigger without authenticationRef with components/kafka-auth", so.Metadata.Name)
						}
					}
				}
			}
			if slices.Contains(v.components, "warc") {
				f := r.workloads["fetcher"]
				if f == nil || f.kind != "StatefulSet" || !r.env(&f.pod.Containers[0], "CRAWLER_WARC_DIR").set {
					t.Error("components/warc: want the fetcher a StatefulSet with CRAWLER_WARC_DIR")
				}
			}
			if slices.Contains(v.components, "render") {
				f := r.workloads["fetcher"]
				if f == nil || r.env(&f.pod.Containers[0], "CRAWLER_RENDER").value != "auto" {
					t.Error("components/render: want the fetcher with CRAWLER_RENDER=auto")
				}
				for _, so := range r.scaled {
					if so.Metadata.Name == "fetcher" && so.Spec.Triggers[0].Metadata["topic"] != "crawler.urls.fetch" {
						t.Errorf("components/render: KEDA scales the fetchers on %q, want the lag of crawler.urls.fetch", so.Spec.Triggers[0].Metadata["topic"])
					}
				}
			}
		})
	}
}

func report(t *testing.T, problems ...[]string) {
	t.Helper()
	for _, ps := range problems {
		for _, p := range ps {
			t.Error(p)
		}
	}
}

// TestK8sChecksFail breaks one manifest at a time, in memory, and expects
// the check that guards it to say so: a check that cannot fail checks
// nothing.
func TestK8sChecksFail(t *testing.T) {
	tree := readK8sTree(t)
	all := []string{"kafka-auth", "kafka-auth-ca", "kafka-auth-client-cert", "warc", "render"}
	for _, tc := range []struct {
		name       string
		dir        string
		components []string
		file       string // under deployments/k8s
		old, new   string
		want       string
	}{
		{
			name: "services on SASL and TLS, triggers without authenticationRef",
			dir:  "overlays/large", components: all,
			file: "components/kafka-auth/kustomization.yaml",
			old:  "path: /spec/triggers/0/authenticationRef", new: "path: /metadata/annotations",
			want: "reach Kafka differently",
		},
		{
			name: "services on TLS through the ConfigMap, no TriggerAuthentication",
			dir:  "overlays/small",
			file: "base/config.yaml",
			old:  "  CRAWLER_LOG_FORMAT: json\n", new: "  CRAWLER_LOG_FORMAT: json\n  CRAWLER_KAFKA_TLS: \"true\"\n",
			want: "reach Kafka differently",
		},
		{
			name: "authenticationRef to a TriggerAuthentication not in the build",
			dir:  "overlays/small", components: []string{"kafka-auth"},
			file: "components/kafka-auth/kustomization.yaml",
			old:  "name: trawl-kafka\n", new: "name: trawl-kafka-typo\n",
			want: "which is not in the build",
		},
		{
			name: "TriggerAuthentication reads a key the Secret lacks",
			dir:  "overlays/small", components: []string{"kafka-auth"},
			file: "components/kafka-auth/trigger-auth.yaml",
			old:  "key: password", new: "key: kafka-password",
			want: "reads trawl-kafka-auth/kafka-password, which is not in the build",
		},
		{
			name: "misspelt KEDA parameter",
			dir:  "overlays/small", components: []string{"kafka-auth"},
			file: "components/kafka-auth/trigger-auth.yaml",
			old:  "parameter: tls", new: "parameter: tsl",
			want: "is no parameter of KEDA's Kafka scaler",
		},
		{
			name: "KEDA and the services name different SASL mechanisms",
			dir:  "overlays/small", components: []string{"kafka-auth"},
			file: "components/kafka-auth/secret.yaml",
			old:  "sasl: scram_sha512", new: "sasl: scram_sha256",
			want: "reach Kafka differently",
		},
		{
			name: "the services' password file is not a key of the Secret",
			dir:  "overlays/small", components: []string{"kafka-auth"},
			file: "components/kafka-auth/kustomization.yaml",
			old:  "value: /run/secrets/kafka/password", new: "value: /run/secrets/kafka/kafka-password",
			want: "no such key in Secret trawl-kafka-auth",
		},
		{
			name: "the services trust a CA that KEDA does not",
			dir:  "overlays/small", components: []string{"kafka-auth", "kafka-auth-ca"},
			file: "components/kafka-auth-ca/kustomization.yaml",
			old:  "{parameter: ca, name: trawl-kafka-auth, key: ca}", new: "{parameter: keyPassword, name: trawl-kafka-auth, key: ca}",
			want: "reach Kafka differently",
		},
		{
			name: "a WARC directory in a Deployment",
			dir:  "overlays/small",
			file: "base/fetcher.yaml",
			old:  "            - name: CRAWLER_INSTANCE_ID\n", new: "            - name: CRAWLER_WARC_DIR\n              value: /tmp/warc\n            - name: CRAWLER_INSTANCE_ID\n",
			want: "want a StatefulSet with a volumeClaimTemplate there",
		},
		{
			name: "the WARC directory beside the claim's mount",
			dir:  "overlays/large", components: all,
			file: "components/warc/kustomization.yaml",
			old:  "mountPath: /var/lib/trawl/warc", new: "mountPath: /var/lib/trawl/archive",
			want: "is on no volume",
		},
		{
			name: "the WARC directory on a claim every pod shares",
			dir:  "overlays/large", components: all,
			file: "base/fetcher.yaml",
			old:  "      volumes:\n", new: "      volumes:\n        - name: warc\n          persistentVolumeClaim:\n            claimName: warc\n",
			want: "no pod volume of that name",
		},
		{
			name: "the WARC volume read-only",
			dir:  "overlays/small", components: []string{"warc"},
			file: "components/warc/kustomization.yaml",
			old:  "          mountPath: /var/lib/trawl/warc\n", new: "          mountPath: /var/lib/trawl/warc\n          readOnly: true\n",
			want: "mounted read-only",
		},
		{
			name: "KEDA scaling the fetcher Deployment that the StatefulSet replaced",
			dir:  "overlays/small", components: []string{"warc"},
			file: "components/warc/kustomization.yaml",
			old:  "path: /spec/scaleTargetRef/kind\n        value: StatefulSet", new: "path: /spec/scaleTargetRef/kind\n        value: Deployment",
			want: "which is not in the build",
		},
		{
			name: "rendering without the Chromium image",
			dir:  "overlays/small", components: []string{"render"},
			file: "components/render/kustomization.yaml",
			old:  "value: trawl/fetcher-render:latest", new: "value: trawl/fetcher:latest",
			want: "which has no Chromium",
		},
		{
			name: "rendering with the base's /dev/shm",
			dir:  "overlays/large", components: all,
			file: "components/render/kustomization.yaml",
			old:  "          mountPath: /dev/shm\n", new: "          mountPath: /dev/shm-not\n",
			want: "without a volume at /dev/shm",
		},
		{
			name: "/dev/shm on disk",
			dir:  "overlays/small", components: []string{"render"},
			file: "components/render/kustomization.yaml",
			old:  "            medium: Memory\n", new: "",
			want: "want an emptyDir with medium Memory",
		},
		{
			name: "Chromium's profile on the read-only root file system",
			dir:  "overlays/small", components: []string{"render", "warc"},
			file: "components/render/kustomization.yaml",
			old:  "          mountPath: /tmp\n", new: "          mountPath: /var/tmp\n",
			want: "on no writable emptyDir",
		},
		{
			name: "more tabs, the same memory",
			dir:  "overlays/small", components: []string{"render"},
			file: "components/render/kustomization.yaml",
			old:  "name: CRAWLER_RENDER_TABS\n          value: \"2\"", new: "name: CRAWLER_RENDER_TABS\n          value: \"4\"",
			want: "memory limit 896Mi for 4 tabs",
		},
		{
			name: "a render mode that is none",
			dir:  "overlays/small", components: []string{"render"},
			file: "components/render/kustomization.yaml",
			old:  "value: auto", new: "value: sometimes",
			want: "CRAWLER_RENDER \"sometimes\" is none of",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := path.Join(k8sRoot, tc.file)
			if !bytes.Contains(tree[file], []byte(tc.old)) {
				t.Fatalf("%s has no %q to break", tc.file, tc.old)
			}
			r := tree.render(t, tc.dir, tc.components, func(files k8sTree) {
				files[file] = bytes.Replace(files[file], []byte(tc.old), []byte(tc.new), 1)
			})
			var problems []string
			for _, ps := range [][]string{r.checkServices(), r.checkKafkaAuth(), r.checkWARC(), r.checkRender()} {
				problems = append(problems, ps...)
			}
			i := slices.IndexFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) })
			if i < 0 {
				t.Fatalf("want a problem with %q, got %q", tc.want, problems)
			}
			t.Log(problems[i])
		})
	}
}
