#!/usr/bin/env python3
"""The checks of e2e/chaos.py's watcher, on made-up snapshots: each violation
the leader-kill test reports is reported when it happens, and a clean run
(held, canary Flat, released) reports nothing."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chaos  # noqa: E402

NS = "apps"


def deployment(name, paused, held=None, released=None):
    ann = {}
    if held:
        ann[chaos.HELD] = held
    if released:
        ann[chaos.RELEASED] = released
    return {"kind": "Deployment", "metadata": {"namespace": NS, "name": name, "annotations": ann},
            "spec": {"paused": paused}}


def canary(name, target, template, verdict=None, variants=None, uid="c1", allocator="jemalloc"):
    status = {"phase": "Completed" if verdict else "Running"}
    if verdict:
        status["verdict"] = verdict
    if variants:
        status["variants"] = [{"name": n, "verdict": v} for n, v in variants.items()]
    return {"kind": "ReplayCanary", "metadata": {"namespace": NS, "name": name, "uid": uid},
            "spec": {"target": {"kind": "Deployment", "name": target}, "templateHash": template,
                     "allocator": {"name": allocator}},
            "status": status}


def job(canary_name, variant, uid):
    return {"kind": "Job", "metadata": {"namespace": NS, "name": f"{canary_name}-{variant}", "uid": uid,
                                        "labels": {chaos.CANARY_LABEL: canary_name, chaos.VARIANT_LABEL: variant}}}


class WatcherTest(unittest.TestCase):
    def setUp(self):
        self.w = chaos.Watcher([NS], 2)

    def see(self, *snapshots):
        for items in snapshots:
            self.w.check(list(items))
        return self.w.counts()

    def test_a_hold_released_on_a_flat_verdict_is_clean(self):
        counts = self.see(
            [deployment("web", True, held="h1")],
            [deployment("web", True, held="h1"), canary("web-h1", "web", "h1"), job("web-h1", "candidate", "j1")],
            [deployment("web", True, held="h1"), canary("web-h1", "web", "h1", "Flat", {"candidate": "Flat"})],
            [deployment("web", False, released="h1"), canary("web-h1", "web", "h1", "Flat", {"candidate": "Flat"})],
        )
        self.assertEqual(counts, {k: 0 for k in counts})

    def test_a_release_without_a_flat_canary_is_unproven(self):
        counts = self.see(
            [deployment("web", True, held="h1"), canary("web-h1", "web", "h1")],
            [deployment("web", False, released="h1"), canary("web-h1", "web", "h1")],
        )
        self.assertEqual(counts["unproven releases"], 1)

    def test_a_release_of_another_template_is_unproven(self):
        counts = self.see(
            [deployment("web", True, held="h1"), canary("web-h1", "web", "h1", "Flat")],
            [deployment("web", False, released="h2"), canary("web-h1", "web", "h1", "Flat")],
        )
        self.assertEqual(counts["unproven releases"], 1)

    def test_a_ratcheting_verdict_does_not_release(self):
        counts = self.see(
            [deployment("web", True, held="h1"), canary("web-h1", "web", "h1", "AllocatorRetention")],
            [deployment("web", False, released="h1"), canary("web-h1", "web", "h1", "AllocatorRetention")],
        )
        self.assertEqual(counts["unproven releases"], 1)

    def test_two_canaries_with_one_spec_are_duplicates(self):
        counts = self.see([canary("web-h1-a", "web", "h1", uid="u1"), canary("web-h1-b", "web", "h1", uid="u2")])
        self.assertEqual(counts["duplicates"], 1)

    def test_canaries_of_one_template_under_different_policies_are_not(self):
        counts = self.see([canary("web-h1-a", "web", "h1", uid="u1"),
                           canary("web-h1-b", "web", "h1", uid="u2", allocator="glibc")])
        self.assertEqual(counts["duplicates"], 0)

    def test_a_job_created_again_for_one_variant_is_a_duplicate(self):
        counts = self.see([job("web-h1", "candidate", "j1")], [], [job("web-h1", "candidate", "j2")])
        self.assertEqual(counts["duplicates"], 1)

    def test_a_verdict_that_goes_is_lost(self):
        counts = self.see([canary("web-h1", "web", "h1", "Flat", {"candidate": "Flat"})],
                          [canary("web-h1", "web", "h1")])
        self.assertGreaterEqual(counts["lost verdicts"], 1)

    def test_a_variant_verdict_that_goes_is_lost(self):
        counts = self.see([canary("web-h1", "web", "h1", None, {"candidate": "Ratchet"})],
                          [canary("web-h1", "web", "h1", None, {})])
        self.assertEqual(counts["lost verdicts"], 1)

    def test_a_canary_that_disappears_or_is_created_again_is_lost(self):
        self.assertEqual(self.see([canary("web-h1", "web", "h1")], [])["lost verdicts"], 1)
        w = chaos.Watcher([NS], 2)
        w.check([canary("web-h1", "web", "h1", "Flat", uid="u1")])
        w.check([canary("web-h1", "web", "h1", "Flat", uid="u2")])
        self.assertEqual(w.counts()["lost verdicts"], 1)

    def test_a_shared_canary_measured_without_labels_proves_the_release(self):
        template = {"metadata": {"labels": {"app": "web", "instance": "b"}},
                    "spec": {"containers": [{"name": "server", "image": "web:1"}]}}
        held, measured = chaos.template_digest(template), chaos.template_digest(template, with_labels=False)
        self.assertNotEqual(held, measured)
        shared = canary("replay-x", "web-a", measured, "Flat", {"candidate": "Flat"})
        shared["metadata"]["ownerReferences"] = [{"kind": "Deployment", "name": "web-a"},
                                                 {"kind": "Deployment", "name": "web"}]
        released = deployment("web", False, released=held)
        released["spec"]["template"] = template
        counts = self.see([deployment("web", True, held=held), shared], [released, shared])
        self.assertEqual(counts, {k: 0 for k in counts})

    def test_template_digests_are_the_operators(self):
        # The vector of operator/api/deployment_test.cc.
        t = {"metadata": {"labels": {"app": "web"}, "annotations": {"allocguard.io/libc": "glibc", "other": "x"}},
             "spec": {"containers": [{"name": "server", "image": "web:1",
                                      "resources": {"limits": {"memory": "512Mi"}}}]}}
        self.assertEqual(chaos.template_digest(t), "37b5d289a2006b03")
        self.assertEqual(chaos.template_digest(t, with_labels=False), "d08d37e06af2048f")

    def test_a_pause_without_the_held_template_has_no_reason(self):
        counts = self.see([deployment("web", True)])
        self.assertEqual(counts["paused without a reason"], 1)


if __name__ == "__main__":
    unittest.main()
