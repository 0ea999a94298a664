"""The chaos run (bench/chaos.py), short: a generated web of 500 pages
over 10 sites crawled by two groups of two workers on a Redis Cluster of 3
masters with replicas (REDIS_WAIT_REPLICAS=1), the MongoDB store
(SecantusDB) and WARC, while, at random (a fixed seed, a fault every 2 s
on average) until the crawl ends (under a minute; 90 s at most), workers
are SIGKILLed and SIGSTOPped, masters SIGKILLed (failed over) or frozen,
the store stopped, the network to the web slowed or cut, a site hangs and
the WARC disk fills: every page stored once with its WARC record, no
politeness violation, no worker left running."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support import ROOT
from tests.support.redis_cluster import redis_server_binary


@pytest.mark.slow
@pytest.mark.chaos
def test_faults_together_lose_nothing():
    env = {**os.environ, "CRAWLER_TEST_REDIS_SERVER": redis_server_binary()}
    done = subprocess.run([sys.executable, "-m", "bench.chaos", "--minutes", "1.5", "--pages", "500", "--sites", "10",
                           "--every", "2", "--seed", "3", "--finish", "8"], cwd=ROOT, capture_output=True, text=True,
                          timeout=900, env=env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    result = json.loads(done.stdout[:done.stdout.index("\n}\n") + 2])
    assert (result["reachable"], result["stored"], result["lost_count"], result["no_warc"]) == (500, 500, 0, 0)
    assert result["violations"] == 0 and result["stuck"] == []
    faults = result["faults"]
    assert sum(faults.values()) >= 10, faults  # the faults happened, of many kinds
    assert len(set(faults) & {"kill_worker", "stop_worker", "kill_master", "freeze_master", "store_down",
                              "web_slow", "web_cut", "web_hang", "disk_full"}) >= 5, faults
