package main

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

// The names allocguard uses (operator/api/names.h).
const (
	injectAnnotation           = "allocguard.io/inject"
	injectedAnnotation         = "allocguard.io/injected"
	policyAnnotation           = "allocguard.io/policy"
	policyGenerationAnnotation = "allocguard.io/policy-generation"
	canaryLabel                = "allocguard.io/canary"
	guardLabel                 = "allocguard.io/guard"
	initContainerName          = "allocguard-init"
	guardContainerName         = "allocguard-guard"
	libraryVolumeName          = "allocguard-lib"
	libraryMountPath           = "/opt/allocguard/inject"
	allocatorDir               = "/opt/allocguard/lib"
	guardMetricsPort           = 9464
)

// policy is the part of an AllocatorPolicy the injection reads. The peer
// holds the benchmark's three policies (bench/admission_review_fixture.h)
// instead of watching them, as allocguard's benchmark handler does.
type policy struct {
	Name           string
	Generation     int64
	Selector       labels.Set
	Containers     []string
	Allocator      string // jemalloc
	Library        string // libjemalloc.so.2
	MallocConf     string
	GuardThreshold int64
}

func benchPolicies() []policy {
	var out []policy
	for _, app := range []string{"web", "checkout", "search"} {
		out = append(out, policy{
			Name:           app + "-jemalloc",
			Generation:     3,
			Selector:       labels.Set{"app": app},
			Containers:     []string{app},
			Allocator:      "jemalloc",
			Library:        "libjemalloc.so.2",
			MallocConf:     "background_thread:true,dirty_decay_ms:1000",
			GuardThreshold: 1536 << 20,
		})
	}
	return out
}

type injector struct {
	Policies          []policy
	OperatorNamespace string
	Image             string
}

// Inject mutates pod as allocguard's DecidePodInjection does for a Pod a
// single policy selects (operator/admission/pod_injection.h, rules 1-6 and
// 8; no circuit-breaker suspensions, no stats agent, no native sidecars, libc
// auto, and the guard does not take the workload's runAsUser: the benchmark's
// Pod sets none). It reports whether it changed anything.
func (in *injector) Inject(ns string, pod *corev1.Pod) bool {
	if ns == "kube-system" || ns == in.OperatorNamespace {
		return false
	}
	if pod.Annotations[injectAnnotation] == "false" {
		return false
	}
	if _, done := pod.Annotations[injectedAnnotation]; done {
		return false
	}
	if _, canary := pod.Labels[canaryLabel]; canary {
		return false
	}
	var matching []*policy
	for i := range in.Policies {
		if in.Policies[i].Selector.AsSelector().Matches(labels.Set(pod.Labels)) {
			matching = append(matching, &in.Policies[i])
		}
	}
	if len(matching) != 1 {
		return false
	}
	p := matching[0]
	selected := selectContainers(pod, p.Containers)
	if len(selected) == 0 {
		return false
	}

	spec := &pod.Spec
	if !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == libraryVolumeName }) {
		spec.Volumes = append(spec.Volumes, corev1.Volume{
			Name:         libraryVolumeName,
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
		})
	}
	spec.InitContainers = slices.DeleteFunc(spec.InitContainers,
		func(c corev1.Container) bool { return c.Name == initContainerName })
	spec.InitContainers = slices.Insert(spec.InitContainers, 0, in.initContainer(p))
	preload := libraryMountPath + "/$LIB/" + p.Library
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			if slices.Contains(selected, list[i].Name) {
				injectContainer(&list[i], preload, p.MallocConf)
			}
		}
	}
	in.addGuard(pod, p, selected)

	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[injectedAnnotation] = p.Allocator
	pod.Annotations[policyAnnotation] = p.Name
	pod.Annotations[policyGenerationAnnotation] = strconv.FormatInt(p.Generation, 10)
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[guardLabel] = "true"
	return true
}

func isOwnContainer(name string) bool {
	return name == initContainerName || name == guardContainerName
}

// selectContainers: the named containers (init containers too), or every
// regular container when names is empty.
func selectContainers(pod *corev1.Pod, names []string) []string {
	var out []string
	for _, c := range pod.Spec.InitContainers {
		if !isOwnContainer(c.Name) && slices.Contains(names, c.Name) {
			out = append(out, c.Name)
		}
	}
	for _, c := range pod.Spec.Containers {
		if !isOwnContainer(c.Name) && (len(names) == 0 || slices.Contains(names, c.Name)) {
			out = append(out, c.Name)
		}
	}
	return out
}

// injectContainer mounts the library, merges LD_PRELOAD and sets the
// allocator's tunables; a user's own value wins.
func injectContainer(c *corev1.Container, preload, mallocConf string) {
	for _, m := range c.VolumeMounts {
		if m.MountPath == libraryMountPath && m.Name != libraryVolumeName {
			return // another volume holds the mount path
		}
	}
	mount := corev1.VolumeMount{Name: libraryVolumeName, MountPath: libraryMountPath, ReadOnly: true}
	if i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == libraryVolumeName }); i >= 0 {
		c.VolumeMounts[i] = mount
	} else {
		c.VolumeMounts = append(c.VolumeMounts, mount)
	}
	mergePreload(c, preload)
	if c.TerminationMessagePolicy == "" || c.TerminationMessagePolicy == corev1.TerminationMessageReadFile {
		c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	}
	if mallocConf != "" && !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "MALLOC_CONF" }) {
		c.Env = append(c.Env, corev1.EnvVar{Name: "MALLOC_CONF", Value: mallocConf})
	}
}

func mergePreload(c *corev1.Container, preload string) {
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "LD_PRELOAD" })
	if i < 0 {
		c.Env = append(c.Env, corev1.EnvVar{Name: "LD_PRELOAD", Value: preload})
		return
	}
	if c.Env[i].ValueFrom != nil {
		return
	}
	parts := strings.FieldsFunc(c.Env[i].Value, func(r rune) bool { return r == ':' || r == ' ' || r == '\t' })
	if slices.Contains(parts, preload) {
		return
	}
	parts = slices.DeleteFunc(parts, func(p string) bool { return strings.HasPrefix(p, libraryMountPath+"/") })
	c.Env[i].Value = strings.Join(append(parts, preload), ":")
}

func restrictedSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To[int64](65532),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func resources(cpuRequest, memRequest, cpuLimit, memLimit string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(cpuRequest),
			corev1.ResourceMemory: resource.MustParse(memRequest),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(cpuLimit),
			corev1.ResourceMemory: resource.MustParse(memLimit),
		},
	}
}

func (in *injector) initContainer(p *policy) corev1.Container {
	return corev1.Container{
		Name:            initContainerName,
		Image:           in.Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{"allocguard", "install-allocator", "--from", allocatorDir, "--to", libraryMountPath, p.Library},
		VolumeMounts:    []corev1.VolumeMount{{Name: libraryVolumeName, MountPath: libraryMountPath}},
		Resources:       resources("10m", "16Mi", "100m", "64Mi"),
		SecurityContext: restrictedSecurityContext(),
	}
}

// addGuard appends the guard sidecar (a regular container) and shares the
// process namespace, unless the pod turned that off.
func (in *injector) addGuard(pod *corev1.Pod, p *policy, selected []string) {
	if pod.Spec.ShareProcessNamespace != nil && !*pod.Spec.ShareProcessNamespace {
		return
	}
	pod.Spec.ShareProcessNamespace = ptr.To(true)
	args := []string{}
	if p.GuardThreshold > 0 {
		args = append(args, "--threshold-bytes", strconv.FormatInt(p.GuardThreshold, 10))
	}
	args = append(args, "--action", "None", "--interval", "2s", "--expected-allocator", p.Allocator)
	// The memory limit of a single governed container, which the guard
	// cannot read from its own cgroup.
	if len(selected) == 1 {
		for _, c := range pod.Spec.Containers {
			if c.Name != selected[0] {
				continue
			}
			if limit, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
				args = append(args, "--limit-bytes", strconv.FormatInt(limit.Value(), 10))
			}
		}
	}
	fieldEnv := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	guard := corev1.Container{
		Name:            guardContainerName,
		Image:           in.Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{"/usr/local/bin/allocguard", "guard"},
		Args:            args,
		Env: []corev1.EnvVar{
			fieldEnv("POD_NAME", "metadata.name"),
			fieldEnv("POD_NAMESPACE", "metadata.namespace"),
			fieldEnv("POD_UID", "metadata.uid"),
		},
		Ports:           []corev1.ContainerPort{{Name: "guard-metrics", ContainerPort: guardMetricsPort, Protocol: corev1.ProtocolTCP}},
		Resources:       resources("10m", "32Mi", "200m", "64Mi"),
		SecurityContext: restrictedSecurityContext(),
	}
	if i := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == guardContainerName }); i >= 0 {
		pod.Spec.Containers[i] = guard
	} else {
		pod.Spec.Containers = append(pod.Spec.Containers, guard)
	}
}
