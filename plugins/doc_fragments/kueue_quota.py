# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """The C(resource_groups) quota option, the same shape on a ClusterQueue and on a Cohort.

    A module overrides the top-level C(description) with what the quota means for its kind; the
    suboptions say for both kinds what the limits are measured against.
    """

    DOCUMENTATION = r"""
options:
  resource_groups:
    description:
      - Groups of resources sharing the same flavors. Each flavor of a group lists a quota for every covered resource.
    type: list
    elements: dict
    default: []
    suboptions:
      covered_resources:
        description:
          - Resources covered by the group, for example C(nvidia.com/gpu), C(cpu), C(memory).
          - Defaults to the resources of the first flavor, in that order.
        type: list
        elements: str
      flavors:
        description:
          - Flavors providing the resources, in order of preference.
        type: list
        elements: dict
        required: true
        suboptions:
          name:
            description: Name of a ResourceFlavor.
            type: str
            required: true
          resources:
            description:
              - Quota per covered resource.
            type: list
            elements: dict
            required: true
            suboptions:
              name:
                description: Resource name, one of the group's covered resources.
                type: str
                required: true
              nominal_quota:
                description:
                  - Quantity guaranteed (for example V(8), V(64), V(256Gi)), to the queue of a ClusterQueue or
                    shared by the subtree of a Cohort.
                type: raw
                required: true
              borrowing_limit:
                description:
                  - How much more than the nominal quota may be borrowed, by a ClusterQueue from its cohort (needs
                    its C(cohort)) or by a Cohort's subtree from its parent (needs its C(parent)). Unset means no limit.
                type: raw
              lending_limit:
                description:
                  - How much of the nominal quota may be lent, to the other queues of a ClusterQueue's cohort or to
                    a Cohort's parent subtree (needs C(cohort) or C(parent)). Unset means all of it; at most the
                    nominal quota.
                type: raw
"""
