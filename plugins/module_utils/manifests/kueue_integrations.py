# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The workload kinds Kueue gates, defined once (issue 11).

Used by the ``kueue`` role (through the ``kueue_integrations_info`` module: which Kueue ``integrations.frameworks``
to enable, the OpenShift operand's names) and by the tenants admission policy (which kinds must carry a queue
label, which pod templates are checked for GPUs). A framework whose API is not served on the cluster is left out
of the ``auto`` list (Kueue would only wait for its CRD).

No I/O.
"""

from __future__ import annotations

import re
import typing as t

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# The scheduling gate Kueue's pod webhook puts on every Pod it manages (pkg/controller/jobs/pod/constants).
ADMISSION_GATE = "kueue.x-k8s.io/admission"
# The gate Kueue's webhook puts on the pod templates of an elastic job (annotation kueue.x-k8s.io/elastic-job: "true",
# e.g. a RayCluster): the pods of a scale-up stay gated until Kueue admits the new workload slice (issue 25).
ELASTIC_JOB_GATE = "kueue.x-k8s.io/elastic-job"


class Integration(t.NamedTuple):
    framework: str        # Kueue's name in Configuration.integrations.frameworks
    openshift: str        # Red Hat build of Kueue operand name (spec.config.integrations.frameworks); "" = not in its enum
    group: str            # API group ("" = core)
    version: str          # served version the policy matches
    kind: str
    resource: str         # plural
    builtin: bool         # a Kubernetes kind (always served) rather than a CRD
    # CEL producing the list of pod specs of ``object``. For builtin kinds the policy checks them whenever the
    # kind is managed; for CRD kinds (which must carry a queue label in tenant namespaces when Kueue manages them)
    # only when Kueue does not manage the kind (issue 22 item 3: a GPU template of an unmanaged kind is refused).
    pod_specs_cel: t.Optional[str] = None

    @property
    def crd(self) -> t.Optional[str]:
        return None if self.builtin else "%s.%s" % (self.resource, self.group)

    @property
    def api_version(self) -> str:
        return "%s/%s" % (self.group, self.version) if self.group else self.version


_TEMPLATE = "[object.spec.template.spec]"


def _ray_cel(base: str) -> str:
    """CEL: the head and worker pod specs of the Ray cluster spec at ``base``."""
    return ("(has(%s) && has(%s.headGroupSpec) ? [%s.headGroupSpec.template.spec] : []) + "
            "(has(%s) && has(%s.workerGroupSpecs) ? %s.workerGroupSpecs.map(g, g.template.spec) : [])"
            % ((base,) * 6))


def _replica_specs_cel(field_name: str) -> str:
    """CEL: the pod specs of a Kubeflow job's ``spec.<field_name>`` map of replica types."""
    base = "object.spec.%s" % field_name
    return ("(has(%s) ? %s.map(k, %s[k]).filter(r, has(r.template) && has(r.template.spec))"
            ".map(r, r.template.spec) : [])" % (base, base, base))


_LWS_CEL = ("(has(object.spec.leaderWorkerTemplate) && has(object.spec.leaderWorkerTemplate.leaderTemplate) ? "
            "[object.spec.leaderWorkerTemplate.leaderTemplate.spec] : []) + "
            "(has(object.spec.leaderWorkerTemplate) && has(object.spec.leaderWorkerTemplate.workerTemplate) ? "
            "[object.spec.leaderWorkerTemplate.workerTemplate.spec] : [])")
_JOBSET_CEL = ("(has(object.spec.replicatedJobs) ? "
               "object.spec.replicatedJobs.map(r, r.template.spec.template.spec) : [])")

INTEGRATIONS: t.Tuple[Integration, ...] = (
    Integration("batch/job", "BatchJob", "batch", "v1", "Job", "jobs", True, _TEMPLATE),
    Integration("pod", "Pod", "", "v1", "Pod", "pods", True, "[object.spec]"),
    Integration("deployment", "Deployment", "apps", "v1", "Deployment", "deployments", True, _TEMPLATE),
    Integration("statefulset", "StatefulSet", "apps", "v1", "StatefulSet", "statefulsets", True, _TEMPLATE),
    Integration("leaderworkerset.x-k8s.io/leaderworkerset", "LeaderWorkerSet", "leaderworkerset.x-k8s.io", "v1",
                "LeaderWorkerSet", "leaderworkersets", False, _LWS_CEL),
    Integration("jobset.x-k8s.io/jobset", "JobSet", "jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", False, _JOBSET_CEL),
    Integration("trainer.kubeflow.org/trainjob", "TrainJob", "trainer.kubeflow.org", "v1alpha1", "TrainJob",
                "trainjobs", False),
    Integration("kubeflow.org/pytorchjob", "PyTorchJob", "kubeflow.org", "v1", "PyTorchJob", "pytorchjobs", False,
                _replica_specs_cel("pytorchReplicaSpecs")),
    Integration("kubeflow.org/tfjob", "TFJob", "kubeflow.org", "v1", "TFJob", "tfjobs", False, _replica_specs_cel("tfReplicaSpecs")),
    Integration("kubeflow.org/xgboostjob", "XGBoostJob", "kubeflow.org", "v1", "XGBoostJob", "xgboostjobs", False,
                _replica_specs_cel("xgbReplicaSpecs")),
    Integration("kubeflow.org/paddlejob", "PaddleJob", "kubeflow.org", "v1", "PaddleJob", "paddlejobs", False,
                _replica_specs_cel("paddleReplicaSpecs")),
    Integration("kubeflow.org/jaxjob", "JaxJob", "kubeflow.org", "v1", "JAXJob", "jaxjobs", False, _replica_specs_cel("jaxReplicaSpecs")),
    Integration("kubeflow.org/mpijob", "MPIJob", "kubeflow.org", "v2beta1", "MPIJob", "mpijobs", False, _replica_specs_cel("mpiReplicaSpecs")),
    Integration("ray.io/rayjob", "RayJob", "ray.io", "v1", "RayJob", "rayjobs", False, _ray_cel("object.spec.rayClusterSpec")),
    Integration("ray.io/raycluster", "RayCluster", "ray.io", "v1", "RayCluster", "rayclusters", False, _ray_cel("object.spec")),
    # The Red Hat build of Kueue's operand enum has RayService from operator 1.4 on (see OPENSHIFT_OPERAND_LIMITS).
    Integration("ray.io/rayservice", "RayService", "ray.io", "v1", "RayService", "rayservices", False,
                _ray_cel("object.spec.rayClusterConfig")),
    Integration("workload.codeflare.dev/appwrapper", "AppWrapper", "workload.codeflare.dev", "v1beta2", "AppWrapper",
                "appwrappers", False),
)

BY_FRAMEWORK: t.Dict[str, Integration] = {i.framework: i for i in INTEGRATIONS}

# Kinds that create GPU pods through a Kubernetes controller without being a Kueue framework: the policy checks
# their pod template like a Deployment's (a bare ReplicaSet would otherwise be a way around the Deployment check).
EXTRA_TEMPLATE_KINDS: t.Tuple[Integration, ...] = (
    Integration("", "", "apps", "v1", "ReplicaSet", "replicasets", True, _TEMPLATE),
    Integration("", "", "apps", "v1", "DaemonSet", "daemonsets", True, _TEMPLATE),
    Integration("", "", "", "v1", "ReplicationController", "replicationcontrollers", True,
                "(has(object.spec.template) ? [object.spec.template.spec] : [])"),
    Integration("", "", "batch", "v1", "CronJob", "cronjobs", True, "[object.spec.jobTemplate.spec.template.spec]"),
)


# The operators that create pods (or child workloads) for Kueue's frameworks, and the frameworks each one runs
# (issue 22 item 3): the admission policy trusts an identity's pods only when Kueue manages one of its frameworks,
# because only then did the parent object go through Kueue. The Job controller runs the Jobs of batch/job and the
# Jobs that JobSet (and so TrainJob), MPIJob v2 and AppWrapper create; the JobSet controller the JobSets of TrainJob.
# Identities not listed here (an admin's own) are trusted whatever Kueue manages.
CONTROLLER_FRAMEWORKS: t.Dict[str, t.Tuple[str, ...]] = {
    "system:serviceaccount:kube-system:job-controller": (
        "batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob", "kubeflow.org/mpijob",
        "workload.codeflare.dev/appwrapper"),
    "system:serviceaccount:jobset-system:jobset-controller-manager": (
        "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob"),
    "system:serviceaccount:lws-system:lws-controller-manager": ("leaderworkerset.x-k8s.io/leaderworkerset",),
    "system:serviceaccount:ray-system:kuberay-operator": ("ray.io/rayjob", "ray.io/raycluster", "ray.io/rayservice"),
    "system:serviceaccount:kubeflow:training-operator": (
        "kubeflow.org/pytorchjob", "kubeflow.org/tfjob", "kubeflow.org/xgboostjob", "kubeflow.org/paddlejob",
        "kubeflow.org/jaxjob", "kubeflow.org/mpijob"),
    "system:serviceaccount:kubeflow-system:kubeflow-trainer-controller-manager": ("trainer.kubeflow.org/trainjob",),
    "system:serviceaccount:appwrapper-system:appwrapper-controller-manager": ("workload.codeflare.dev/appwrapper",),
}


def trusted_controllers(identities: t.Iterable[str], frameworks: t.Iterable[str]) -> t.List[str]:
    """The identities of ``identities`` (in order) to trust when Kueue manages ``frameworks``: those mapped in
    ``CONTROLLER_FRAMEWORKS`` to at least one managed framework, and every identity the mapping does not name."""
    managed = set(frameworks)
    return [i for i in identities if i not in CONTROLLER_FRAMEWORKS or managed.intersection(CONTROLLER_FRAMEWORKS[i])]


def integrations_of(frameworks: t.Optional[t.Iterable[str]]) -> t.Tuple[Integration, ...]:
    """The ``Integration`` entries of ``frameworks`` (known upstream names) in the order of ``INTEGRATIONS``;
    ``None`` means every known framework (``INTEGRATIONS`` itself). Unknown names raise KeyError."""
    if frameworks is None:
        return INTEGRATIONS
    wanted = set(frameworks)
    missing = [f for f in frameworks if f not in BY_FRAMEWORK]
    if missing:
        raise KeyError(", ".join(missing))
    return tuple(i for i in INTEGRATIONS if i.framework in wanted)


def known_frameworks() -> t.List[str]:
    return [i.framework for i in INTEGRATIONS]


# The Red Hat build of Kueue's operand, openshift/kueue-operator manifests/kueue.openshift.io_kueues.yaml:
# spec.config.integrations.frameworks is an enum with maxItems, by operator minor version (release-1.3: no
# RayService nor SparkApplication, at most 14; release-1.4, channel stable-v1.4: both, at most 18). Its API server
# refuses anything else, so the collection reports it before writing. The lab serves both schemas (lab/crds/).
OPENSHIFT_OPERAND_LIMITS: t.Dict[str, t.Tuple[t.FrozenSet[str], int]] = {
    "1.3": (frozenset({"RayService", "SparkApplication"}), 14),
    "1.4": (frozenset(), 18),
}
# The collection's default channel (roles/kueue gpuaas_kueue_olm_channel: stable-v1.4).
DEFAULT_OPENSHIFT_OPERATOR = "1.4"


def openshift_operator_version(channel: t.Optional[str] = None, starting_csv: t.Optional[str] = None) -> str:
    """The operator minor version whose operand schema applies: from the starting CSV (kueue-operator.v1.3.1), else
    the channel (stable-v1.3), else the default; versions before 1.3 follow 1.3's rules, after 1.4 1.4's."""
    for text, pattern in ((starting_csv, r"\.v(\d+)\.(\d+)"), (channel, r"v(\d+)\.(\d+)")):
        match = re.search(pattern, text or "")
        if match:
            minor = (int(match.group(1)), int(match.group(2)))
            return "1.3" if minor <= (1, 3) else "1.4"
    return DEFAULT_OPENSHIFT_OPERATOR


def unsupported_openshift_operator(channel: t.Optional[str] = None,
                                   starting_csv: t.Optional[str] = None) -> t.Optional[str]:
    """Why the Red Hat build of Kueue the channel or starting CSV installs is not one the collection supports (the
    versions of OPENSHIFT_OPERAND_LIMITS, docs/compatibility.md's "Red Hat build of Kueue" row); None when it is, or
    when neither names a version (a channel such as ``stable`` follows the catalog)."""
    supported = ", ".join(sorted(OPENSHIFT_OPERAND_LIMITS, key=lambda v: tuple(int(x) for x in v.split("."))))
    for variable, text, pattern in (("gpuaas_kueue_olm_starting_csv", starting_csv, r"\.v(\d+)\.(\d+)"),
                                    ("gpuaas_kueue_olm_channel", channel, r"v(\d+)\.(\d+)")):
        match = re.search(pattern, text or "")
        if not match:
            continue
        version = "%s.%s" % (int(match.group(1)), int(match.group(2)))
        if version in OPENSHIFT_OPERAND_LIMITS:
            return None
        return ("%s %s installs the Red Hat build of Kueue %s, which this collection does not support: supported "
                "operator %s (docs/compatibility.md); set gpuaas_kueue_olm_channel to stable-v%s"
                % (variable, text, version, supported, DEFAULT_OPENSHIFT_OPERATOR)
                + (" and clear gpuaas_kueue_olm_starting_csv" if variable == "gpuaas_kueue_olm_starting_csv" else ""))
    return None


def openshift_names(frameworks: t.Iterable[str], version: str = DEFAULT_OPENSHIFT_OPERATOR) -> t.List[str]:
    """Upstream framework names -> the Red Hat operand's names, dropping those its enum (of operator ``version``)
    cannot express (unknown names raise KeyError)."""
    excluded = OPENSHIFT_OPERAND_LIMITS[version][0]
    return [BY_FRAMEWORK[f].openshift for f in frameworks
            if BY_FRAMEWORK[f].openshift and BY_FRAMEWORK[f].openshift not in excluded]


def openshift_operand(frameworks: t.Sequence[str], auto: bool,
                      version: str = DEFAULT_OPENSHIFT_OPERATOR) -> t.Dict[str, t.List[str]]:
    """What the Red Hat ``Kueue`` operand of operator ``version`` can carry of ``frameworks`` (known upstream names).

    Returns ``frameworks`` (operand names), ``not_expressible`` (upstream names outside its enum) and ``problems``
    (messages: the run must stop before writing). A framework outside the enum is a problem when it was asked for
    by name, and only left out (reported in ``not_expressible``) when ``auto`` picked it because its CRD is served;
    more than the cap is always a problem, because which ones to drop is the admin's choice.
    """
    names = openshift_names(frameworks, version)
    expressible = set(names)
    not_expressible = [f for f in frameworks if BY_FRAMEWORK[f].openshift not in expressible]
    cap = OPENSHIFT_OPERAND_LIMITS[version][1]
    problems = []
    if not_expressible and not auto:
        problems.append("gpuaas_kueue_integrations: %s cannot be managed by the Red Hat build of Kueue %s (its Kueue "
                        "operand's frameworks enum does not include %s); remove %s from the list%s"
                        % (", ".join(not_expressible), version, "it" if len(not_expressible) == 1 else "them",
                           "it" if len(not_expressible) == 1 else "them",
                           " or use operator 1.4 (gpuaas_kueue_olm_channel: stable-v1.4)" if version == "1.3" else ""))
    if len(names) > cap:
        problems.append("gpuaas_kueue_integrations: %d frameworks (%s) but the Red Hat build of Kueue %s's operand "
                        "takes at most %d; set gpuaas_kueue_integrations to the %d or fewer your tenants run"
                        % (len(names), ", ".join(names), version, cap, cap))
    return {"frameworks": names, "not_expressible": not_expressible, "problems": problems}


def unknown(frameworks: t.Iterable[str]) -> t.List[str]:
    return [f for f in frameworks if f not in BY_FRAMEWORK]


def auto_frameworks(served_crds: t.Iterable[str], candidates: t.Optional[t.Iterable[str]] = None) -> t.List[str]:
    """The frameworks of ``candidates`` (default: every known one) that this cluster can run: builtin kinds
    always, CRD kinds when their CRD name is in ``served_crds``. Order of ``INTEGRATIONS``."""
    served = set(served_crds)
    wanted = set(candidates) if candidates is not None else set(BY_FRAMEWORK)
    return [i.framework for i in INTEGRATIONS if i.framework in wanted and (i.builtin or i.crd in served)]


def crd_kinds() -> t.List[Integration]:
    return [i for i in INTEGRATIONS if not i.builtin]


def template_kinds() -> t.List[Integration]:
    """Builtin kinds whose pod templates the policy checks for GPU requests (Pod excluded: checked on its own)."""
    return [i for i in INTEGRATIONS if i.builtin and i.kind != "Pod"] + list(EXTRA_TEMPLATE_KINDS)
