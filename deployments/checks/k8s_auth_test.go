package checks

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// kafkaAuth is how a Kafka client authenticates, in one spelling for the
// services (CRAWLER_KAFKA_*, libs/kafkaio) and KEDA's Kafka scaler (its
// authentication parameters). A credential is the Secret and key it is
// read from: the two agree when they read the same key of the same Secret.
type kafkaAuth struct {
	sasl          string // KEDA's spelling: plaintext, scram_sha256, scram_sha512; "" none
	username      string
	password      secretKeyRef
	tls           bool
	ca, cert, key secretKeyRef
}

type secretKeyRef struct{ secret, key string }

func (s secretKeyRef) String() string {
	if s.secret == "" {
		return "none"
	}
	return s.secret + "/" + s.key
}

// saslKEDA is the KEDA spelling of the services' SASL mechanisms
// (kafkaio.SASLMechanisms).
var saslKEDA = map[string]string{
	"PLAIN":         "plaintext",
	"SCRAM-SHA-256": "scram_sha256",
	"SCRAM-SHA-512": "scram_sha512",
}

// kedaKafkaParams are the authentication parameters of KEDA's Kafka scaler
// (keda.sh, "Apache Kafka", "Authentication Parameters") that a
// TriggerAuthentication may set; a misspelt one is ignored by KEDA.
var kedaKafkaParams = map[string]bool{
	"sasl": true, "saslTokenProvider": true, "username": true, "password": true,
	"tls": true, "ca": true, "cert": true, "key": true, "keyPassword": true,
	"keytab": true, "realm": true, "kerberosConfig": true, "kerberosServiceName": true,
	"kerberosDisableFAST": true, "oauthTokenEndpointUri": true, "scopes": true,
	"oauthExtensions": true, "awsRegion": true, "awsRoleArn": true,
	"awsAccessKeyID": true, "awsSecretAccessKey": true,
}

// serviceKafkaAuth is how the service name, whose pod is p, reaches Kafka.
func (r *rendered) serviceKafkaAuth(name string, p *corev1.PodSpec) (kafkaAuth, []string) {
	var a kafkaAuth
	var bad []string
	c := &p.Containers[0]
	service := name
	file := func(variable string) secretKeyRef {
		e := r.env(c, variable)
		if e.value == "" {
			return secretKeyRef{}
		}
		s, k, err := r.secretFile(p, c, e.value)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %s: %v", service, variable, err))
			return secretKeyRef{secret: "?", key: e.value}
		}
		return secretKeyRef{s, k}
	}
	if m := r.env(c, "CRAWLER_KAFKA_SASL_MECHANISM").value; m != "" {
		a.sasl = saslKEDA[m]
		if a.sasl == "" {
			bad = append(bad, fmt.Sprintf("%s: CRAWLER_KAFKA_SASL_MECHANISM %q is not one the services know", name, m))
		}
		a.username = r.env(c, "CRAWLER_KAFKA_SASL_USERNAME").value
		a.password = file("CRAWLER_KAFKA_SASL_PASSWORD_FILE")
	}
	a.ca = file("CRAWLER_KAFKA_TLS_CA_FILE")
	a.cert = file("CRAWLER_KAFKA_TLS_CERT_FILE")
	a.key = file("CRAWLER_KAFKA_TLS_KEY_FILE")
	// The other kafka-tls-… settings imply TLS (libs/tlsfiles).
	a.tls = r.env(c, "CRAWLER_KAFKA_TLS").value == "true" || a.ca.secret != "" || a.cert.secret != "" || a.key.secret != ""
	return a, bad
}

// kedaKafkaAuth is how the kafka trigger i of so reaches Kafka: its
// TriggerAuthentication, which must exist in its namespace and read keys
// that exist in Secrets of that namespace.
func (r *rendered) kedaKafkaAuth(so *scaledObject, i int) (kafkaAuth, []string) {
	var a kafkaAuth
	var bad []string
	tr := so.Spec.Triggers[i]
	where := fmt.Sprintf("ScaledObject %s trigger %d", so.Metadata.Name, i)
	params := map[string]secretKeyRef{}
	if ref := tr.AuthenticationRef; ref != nil {
		ta, ok := r.triggerAuths[ref.Name]
		switch {
		case ref.Kind != "" && ref.Kind != "TriggerAuthentication":
			bad = append(bad, fmt.Sprintf("%s: authenticationRef to a %s, want a TriggerAuthentication of the build", where, ref.Kind))
		case !ok:
			bad = append(bad, fmt.Sprintf("%s: authenticationRef to TriggerAuthentication %s, which is not in the build", where, ref.Name))
		case ta.Metadata.Namespace != so.Metadata.Namespace:
			bad = append(bad, fmt.Sprintf("%s: TriggerAuthentication %s is in namespace %q, the ScaledObject in %q", where, ref.Name, ta.Metadata.Namespace, so.Metadata.Namespace))
		default:
			for _, st := range ta.Spec.SecretTargetRef {
				if !kedaKafkaParams[st.Parameter] {
					bad = append(bad, fmt.Sprintf("TriggerAuthentication %s: %q is no parameter of KEDA's Kafka scaler", ta.Metadata.Name, st.Parameter))
				}
				s, ok := r.secrets[st.Name]
				if _, has := r.secretValue(st.Name, st.Key); !ok || !has {
					bad = append(bad, fmt.Sprintf("TriggerAuthentication %s: parameter %s reads %s/%s, which is not in the build", ta.Metadata.Name, st.Parameter, st.Name, st.Key))
				} else if s.Namespace != ta.Metadata.Namespace {
					bad = append(bad, fmt.Sprintf("TriggerAuthentication %s: Secret %s is in another namespace", ta.Metadata.Name, st.Name))
				}
				params[st.Parameter] = secretKeyRef{st.Name, st.Key}
			}
		}
	}
	value := func(param string) string {
		if p, ok := params[param]; ok {
			v, _ := r.secretValue(p.secret, p.key)
			return strings.TrimSpace(v)
		}
		// KEDA also takes sasl and tls from the trigger's metadata.
		return tr.Metadata[param]
	}
	switch s := value("sasl"); s {
	case "", "none":
	case "plaintext", "scram_sha256", "scram_sha512":
		a.sasl = s
		a.username = value("username")
		a.password = params["password"]
	default:
		bad = append(bad, fmt.Sprintf("%s: sasl %q, which the services do not speak", where, s))
	}
	switch t := value("tls"); t {
	case "", "disable":
	case "enable":
		a.tls = true
		a.ca, a.cert, a.key = params["ca"], params["cert"], params["key"]
	default:
		bad = append(bad, fmt.Sprintf("%s: tls %q, want enable or disable", where, t))
	}
	return a, bad
}

// checkKafkaAuth checks that every kafka trigger reaches Kafka as every
// service does: the same SASL mechanism, user and password (the key of the
// same Secret the services read the password file from), TLS on or off in
// both, and the same CA, client certificate and key. A Kafka the services
// authenticate to and the triggers do not (no authenticationRef) fails.
func (r *rendered) checkKafkaAuth() []string {
	var bad []string
	svcs := map[string]kafkaAuth{}
	for _, name := range services {
		if w, ok := r.workloads[name]; ok {
			a, b := r.serviceKafkaAuth(name, w.pod)
			svcs[name] = a
			bad = append(bad, b...)
		}
	}
	for _, so := range r.scaled {
		for i, tr := range so.Spec.Triggers {
			if tr.Type != "kafka" {
				continue
			}
			keda, b := r.kedaKafkaAuth(so, i)
			bad = append(bad, b...)
			for _, name := range services {
				if svc, ok := svcs[name]; ok && keda != svc {
					bad = append(bad, fmt.Sprintf("ScaledObject %s trigger %d and %s reach Kafka differently:\n\tKEDA:    %s\n\tservice: %s", so.Metadata.Name, i, name, keda, svc))
				}
			}
		}
	}
	return bad
}

func (a kafkaAuth) String() string {
	return fmt.Sprintf("sasl=%q user=%q password=%s tls=%v ca=%s cert=%s key=%s", a.sasl, a.username, a.password, a.tls, a.ca, a.cert, a.key)
}
