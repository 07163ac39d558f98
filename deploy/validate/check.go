package validate

import (
	"fmt"
	"reflect"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Check reports what an API server (or the Prometheus Operator) would refuse or
// silently ignore in objects that decoded cleanly: invalid names and labels, a selector
// that does not match its pod template, probes and monitors naming ports that do not
// exist, volume mounts without a volume, requests above limits, Secrets referenced but
// not defined nor documented as pre-existing.
func Check(objects []runtime.Object) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var pods []corev1.PodTemplateSpec
	var services []*corev1.Service
	for _, o := range objects {
		meta, ok := o.(metav1.Object)
		if !ok {
			add("%T has no metadata", o)
			continue
		}
		kind := o.GetObjectKind().GroupVersionKind().Kind
		for _, msg := range validation.IsDNS1123Subdomain(meta.GetName()) {
			add("%s %q: name: %s", kind, meta.GetName(), msg)
		}
		for k, v := range meta.GetLabels() {
			for _, msg := range validation.IsQualifiedName(k) {
				add("%s %q: label key %q: %s", kind, meta.GetName(), k, msg)
			}
			for _, msg := range validation.IsValidLabelValue(v) {
				add("%s %q: label %s=%q: %s", kind, meta.GetName(), k, v, msg)
			}
		}
		switch obj := o.(type) {
		case *appsv1.DaemonSet:
			selector, err := metav1.LabelSelectorAsSelector(obj.Spec.Selector)
			if err != nil {
				add("DaemonSet %q: selector: %v", obj.Name, err)
			} else if selector.Empty() || !selector.Matches(labels.Set(obj.Spec.Template.Labels)) {
				add("DaemonSet %q: selector %v does not match the template's labels %v", obj.Name, selector, obj.Spec.Template.Labels)
			}
			problems = append(problems, checkPod(obj.Name, &obj.Spec.Template.Spec)...)
			pods = append(pods, obj.Spec.Template)
		case *corev1.Service:
			services = append(services, obj)
		}
	}
	for _, o := range objects {
		switch m := o.(type) {
		case *monitoringv1.ServiceMonitor:
			for _, ep := range m.Spec.Endpoints {
				if !serviceHasPort(services, &m.Spec.Selector, ep.Port) {
					add("ServiceMonitor %q: no selected Service has a port named %q", m.Name, ep.Port)
				}
			}
		case *monitoringv1.PodMonitor:
			for _, ep := range m.Spec.PodMetricsEndpoints {
				if !podHasPort(pods, &m.Spec.Selector, portName(ep)) {
					add("PodMonitor %q: no selected pod has a port named %q", m.Name, portName(ep))
				}
			}
		case *monitoringv1.PrometheusRule:
			alerts := 0
			for _, g := range m.Spec.Groups {
				for _, r := range g.Rules {
					if r.Alert != "" {
						alerts++
					}
					if r.Expr.String() == "" {
						add("PrometheusRule %q: rule %q in group %q has no expr", m.Name, r.Alert, g.Name)
					}
				}
			}
			if alerts == 0 {
				add("PrometheusRule %q carries no alert", m.Name)
			}
		}
	}
	return problems
}

func checkPod(owner string, pod *corev1.PodSpec) []string {
	var problems []string
	add := func(format string, args ...any) {
		problems = append(problems, owner+": "+fmt.Sprintf(format, args...))
	}
	volumes := map[string]bool{}
	for _, v := range pod.Volumes {
		for _, msg := range validation.IsDNS1123Label(v.Name) {
			add("volume %q: %s", v.Name, msg)
		}
		volumes[v.Name] = true
	}
	for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
		for _, msg := range validation.IsDNS1123Label(c.Name) {
			add("container %q: %s", c.Name, msg)
		}
		ports := map[string]int32{}
		for _, p := range c.Ports {
			if p.Name != "" {
				for _, msg := range validation.IsValidPortName(p.Name) {
					add("container %q port %q: %s", c.Name, p.Name, msg)
				}
				ports[p.Name] = p.ContainerPort
			}
			if pod.HostNetwork && p.HostPort != 0 && p.HostPort != p.ContainerPort {
				add("container %q port %q: with hostNetwork hostPort must equal containerPort", c.Name, p.Name)
			}
		}
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				add("container %q mounts %q, which is no volume of the pod", c.Name, m.Name)
			}
		}
		for _, e := range c.Env {
			for _, msg := range validation.IsEnvVarName(e.Name) {
				add("container %q env %q: %s", c.Name, e.Name, msg)
			}
		}
		for what, probe := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
			if probe != nil && probe.HTTPGet != nil && !portExists(ports, probe.HTTPGet.Port) {
				add("container %q %s probe: port %s is not a port of the container", c.Name, what, probe.HTTPGet.Port.String())
			}
		}
		for name, limit := range c.Resources.Limits {
			if request, ok := c.Resources.Requests[name]; ok && request.Cmp(limit) > 0 {
				add("container %q: %s request %s is above its limit %s", c.Name, name, request.String(), limit.String())
			}
		}
		if sc := c.SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
			add("container %q is privileged", c.Name)
		}
	}
	return problems
}

func portExists(ports map[string]int32, port intstr.IntOrString) bool {
	if port.Type == intstr.String {
		_, ok := ports[port.StrVal]
		return ok
	}
	for _, p := range ports {
		if p == port.IntVal {
			return true
		}
	}
	return len(ports) == 0 && port.IntVal > 0
}

func serviceHasPort(services []*corev1.Service, selector *metav1.LabelSelector, port string) bool {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return false
	}
	for _, s := range services {
		if !sel.Matches(labels.Set(s.Labels)) {
			continue
		}
		for _, p := range s.Spec.Ports {
			if p.Name == port {
				return true
			}
		}
	}
	return false
}

func podHasPort(pods []corev1.PodTemplateSpec, selector *metav1.LabelSelector, port string) bool {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return false
	}
	for _, p := range pods {
		if !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		for _, c := range p.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == port {
					return true
				}
			}
		}
	}
	return false
}

// portName is a PodMonitor endpoint's port name: a string up to operator v0.7x, a
// pointer since.
func portName(ep monitoringv1.PodMetricsEndpoint) string {
	v := reflect.ValueOf(ep).FieldByName("Port")
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	return v.String()
}
