#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kueue_import
short_description: Write the gpuaas inventory of an existing Kueue setup (brownfield import)
version_added: "0.2.0"
description:
  - Reads the ResourceFlavors, Cohorts, WorkloadPriorityClasses, ClusterQueues and LocalQueues of a cluster (one
    LIST per kind, any served Kueue version) and returns the equivalent C(gpuaas_flavors), C(gpuaas_cohorts),
    C(gpuaas_priorities) and C(gpuaas_tenants) inventory, in the contract the C(gpuaas.platform.tenants) module
    validates; with O(dest) it also writes them to a YAML file (group_vars).
  - "One tenant per ClusterQueue, named like it; its namespaces are those of the LocalQueues pointing at it
    (LocalQueue C(default) everywhere means C(default_queue: true), other LocalQueues become C(queues)). The
    collection's own namespace labels, C(allowed_priorities) annotation and RoleBindings (C(access)) are read back
    too, so importing what the collection built gives back the inventory it was built from."
  - A Cohort's shared quota (C(spec.resourceGroups)) becomes its C(quotas) in C(gpuaas_cohorts).
  - Everything the inventory cannot express (a ClusterQueue's namespace selector, stop
    policy, flavor fungibility or admission checks, a LocalQueue's fair sharing, LocalQueues in system namespaces or
    of a ClusterQueue that is not imported, autoscaling) is reported as a warning and in RV(import_warnings), never dropped
    silently. The imported inventory is built again and compared with the live objects; each object the first
    tenants run would change is a warning too.
  - RV(adopt) lists the existing objects the inventory builds that the collection does not manage; pass them as
    C(gpuaas_tenants_adopt) to the tenants playbook (its ownership guard refuses them otherwise). The first run then
    adds the ownership labels (and the tenant label the ClusterQueues' namespace selectors use), and the next run
    reports no change.
  - Read-only on the cluster.
author:
  - gpuaas.platform contributors (@gpuaas)
options:
  label_selector:
    description:
      - Import only the Kueue objects with these labels, for example C(team.example.com/import=yes).
        By default every object of the imported kinds.
    type: str
  dest:
    description:
      - Write the inventory (and, when there is something to adopt, C(gpuaas_tenants_adopt)) to this YAML file on the
        controller, for example C(inventory/gpu-prod/group_vars/all/tenants.yml). An existing file is replaced.
      - Without it, the inventory is only returned.
    type: path
attributes:
  check_mode:
    description: Reads as always; O(dest) is not written, RV(changed) says whether it would be.
    support: full
  diff_mode:
    description: With O(dest), the old and new file content.
    support: full
notes:
  - Requires the C(kubernetes) Python library and Kueue (C(v1beta2), or C(v1beta1) on older clusters).
  - The output is canonical (lists in name order, values equal to Kueue's defaults left out).
  - Autoscaling (KEDA ScaledObjects) is not imported; ScaledObjects the collection made are reported.
seealso:
  - module: gpuaas.platform.tenants
    description: Converges the cluster to the inventory this module writes.
  - module: gpuaas.platform.kueue_info
    description: The same Kueue objects, read-only and summarized.
extends_documentation_fragment:
  - gpuaas.platform.k8s_auth
"""

EXAMPLES = r"""
- name: Write the inventory of the cluster's Kueue setup
  gpuaas.platform.kueue_import:
    dest: "{{ inventory_dir }}/group_vars/all/tenants.yml"
  register: imported

- name: Then converge it, adopting what the collection did not create
  ansible.builtin.include_role:
    name: gpuaas.platform.tenants
  vars:
    gpuaas_flavors: "{{ imported.inventory.gpuaas_flavors }}"
    gpuaas_cohorts: "{{ imported.inventory.gpuaas_cohorts }}"
    gpuaas_priorities: "{{ imported.inventory.gpuaas_priorities }}"
    gpuaas_tenants: "{{ imported.inventory.gpuaas_tenants }}"
    gpuaas_tenants_adopt: "{{ imported.adopt }}"

- name: Only the queues labelled for the migration
  gpuaas.platform.kueue_import:
    label_selector: migrate-to-gpuaas=true
"""

RETURN = r"""
changed:
  description: Whether O(dest) was (or, in check mode, would be) written with a different content.
  returned: always
  type: bool
inventory:
  description: The imported C(gpuaas_flavors), C(gpuaas_cohorts), C(gpuaas_priorities) and C(gpuaas_tenants).
  returned: always
  type: dict
  sample: {"gpuaas_flavors": [{"name": "h100", "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}],
           "gpuaas_cohorts": [{"name": "research"}], "gpuaas_priorities": [],
           "gpuaas_tenants": [{"name": "nlp", "namespaces": ["nlp-train"], "cohort": "research",
                               "quotas": [{"flavor": "h100", "resources": {"nvidia.com/gpu": "8"},
                                           "borrowing_limit": {"nvidia.com/gpu": "4"}}]}]}
adopt:
  description: Existing objects (C(Kind/name), C(Kind/namespace/name)) the inventory builds that the collection does
    not manage yet, for C(gpuaas_tenants_adopt).
  returned: always
  type: list
  elements: str
  sample: ["ClusterQueue/nlp", "LocalQueue/nlp-train/default", "ResourceFlavor/h100"]
import_warnings:
  description:
    - What the inventory cannot express or the first tenants run changes; each is also shown as a warning.
    - (Not C(warnings), which Ansible consumes to display them.)
  returned: always
  type: list
  elements: str
objects:
  description: Number of objects read per kind.
  returned: always
  type: dict
  sample: {"ClusterQueue": 3, "LocalQueue": 5, "Cohort": 2, "ResourceFlavor": 2, "WorkloadPriorityClass": 1}
api_version:
  description: Kueue API version read.
  returned: always
  type: str
  sample: v1beta2
dest:
  description: The file written (or that would be written in check mode).
  returned: when O(dest) is set
  type: str
"""

import os
import tempfile
import typing as t

from ansible.module_utils.common.text.converters import to_native

try:  # PyYAML comes with ansible-core on the controller; a remote Python may lack it (only needed for dest)
    import yaml
    HAS_YAML = True
except ImportError:
    HAS_YAML = False

from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError
from ansible_collections.gpuaas.platform.plugins.module_utils.inventory.model import InventoryError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import (
    ApiException,
    get_client,
    translate_api_exception,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.kueue_versions import cohort_api_version, kueue_api_version
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import OWNED_SELECTOR
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import keda, kueue_import
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.tenancy import RBAC_V
from ansible_collections.gpuaas.platform.plugins.module_utils.module_base import GpuaasModule

HEADER = """\
# Written by gpuaas.platform.kueue_import from the cluster's Kueue objects (docs/tenants.md, Brownfield adoption).
# Review the warnings of the run that wrote it. gpuaas_tenants_adopt (when present) lists the existing objects the
# first tenants run may take over; once that run has passed it is no longer needed.
"""


class KueueReader:
    """The reads of the import (one LIST per kind); the module's work, separate from AnsibleModule for unit tests."""

    def __init__(self, client: t.Any, label_selector: t.Optional[str] = None) -> None:
        self.client = client
        self.label_selector = label_selector or None
        self.warnings: t.List[str] = []

    def list(self, api_version: str, kind: str, selector: t.Optional[str], optional: bool = False) -> t.List[t.Dict[str, t.Any]]:
        try:
            items = self.client.resource(api_version, kind).list(label_selector=selector)
        except ApiException as exc:
            err = translate_api_exception(exc, "list", "%s %s" % (api_version, kind))
            if optional and err.details.get("status") == 403:
                self.warnings.append("cannot list %s (forbidden): %s" % (kind, "what it adds to the import is missing"))
                return []
            raise err
        except GpuaasError as err:
            if optional and err.details.get("reason") == "NotServed":
                return []
            raise
        for item in items:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return items

    def read(self) -> t.Tuple[str, t.Dict[str, t.List[t.Dict[str, t.Any]]]]:
        version = kueue_api_version(self.client)
        kueue_av = "kueue.x-k8s.io/%s" % version
        objects: t.Dict[str, t.List[t.Dict[str, t.Any]]] = {}
        for kind in kueue_import.IMPORTED_KUEUE_KINDS:
            av = "kueue.x-k8s.io/%s" % cohort_api_version(self.client, version) if kind == "Cohort" else kueue_av
            # Kueue releases before Cohort objects: their cohorts are implicit (named by ClusterQueues only).
            objects[kind] = self.list(av, kind, self.label_selector, optional=kind == "Cohort")
        # Every namespace, whatever the selector: whether a tenant namespace exists unlabelled decides what to adopt.
        objects["Namespace"] = self.list("v1", "Namespace", None)
        # The collection's own RoleBindings (access) and ScaledObjects (reported): only those it labelled.
        objects["RoleBinding"] = self.list(RBAC_V, "RoleBinding", OWNED_SELECTOR, optional=True)
        objects["ScaledObject"] = self.list(keda.KEDA_V, "ScaledObject", OWNED_SELECTOR, optional=True)
        return version, objects


def render(result: kueue_import.KueueImport) -> str:
    """The dest file: the inventory variables (and gpuaas_tenants_adopt when needed), one YAML document."""
    data: t.Dict[str, t.Any] = dict(result.inventory)
    if result.adopt:
        data["gpuaas_tenants_adopt"] = list(result.adopt)
    if not HAS_YAML:
        raise GpuaasError("writing dest needs the PyYAML Python library on the host that runs the module",
                          hint="install it (pip install pyyaml) or run the module on the controller (connection: local)")
    return "---\n" + HEADER + yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=120)


def run_import(client: t.Any, params: t.Mapping[str, t.Any], check_mode: bool = False,
               diff: bool = False) -> t.Tuple[t.Dict[str, t.Any], t.List[str]]:
    """(module result, warnings) of one import."""
    reader = KueueReader(client, params.get("label_selector"))
    version, objects = reader.read()
    try:
        imported = kueue_import.import_inventory(objects)
    except InventoryError as err:
        raise GpuaasError("the imported inventory does not pass the inventory validation: %s" % err.message,
                          hint="this setup uses something the import does not translate; please report it with the "
                               "problems listed, and write the affected tenants by hand",
                          problems=err.problems)
    warnings = reader.warnings + imported.warnings
    out: t.Dict[str, t.Any] = {
        "changed": False, "inventory": imported.inventory, "adopt": imported.adopt, "import_warnings": warnings,
        "objects": {kind: len(objects[kind]) for kind in kueue_import.IMPORTED_KUEUE_KINDS}, "api_version": version,
    }
    dest = params.get("dest")
    if dest:
        content = render(imported)
        old = None
        if os.path.exists(dest):
            with open(dest, encoding="utf-8") as handle:
                old = handle.read()
        out["dest"] = dest
        out["changed"] = old != content
        if diff:
            out["diff"] = {"before": old or "", "after": content, "before_header": dest, "after_header": dest}
        if out["changed"] and not check_mode:
            write_atomically(dest, content)
    return out, warnings


def write_atomically(dest: str, content: str) -> None:
    directory = os.path.dirname(os.path.abspath(dest))
    if not os.path.isdir(directory):
        raise GpuaasError("cannot write %s: the directory %s does not exist" % (dest, directory),
                          hint="create the inventory directory first, or point dest at an existing one")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".kueue_import.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise GpuaasError("cannot write %s: %s" % (dest, to_native(exc)), hint="check the path and its permissions")


def main() -> None:
    argument_spec: t.Dict[str, t.Any] = dict(
        label_selector=dict(type="str"),
        dest=dict(type="path"),
    )
    module = GpuaasModule(argument_spec=argument_spec, supports_check_mode=True)

    def import_and_warn(mod: GpuaasModule) -> t.Dict[str, t.Any]:
        result, warnings = run_import(get_client(mod), mod.params, mod.check_mode, mod._diff)
        for warning in warnings:
            mod.warn(warning)
        return result

    module.run(import_and_warn, changed=False)


if __name__ == "__main__":
    main()
