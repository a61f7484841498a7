"""The metrics endpoint (`wspipe -l ... --metrics PATH`) read by prometheus_client's parser.

    metrics.py scrape URL [TOKEN]      GET URL (with the bearer TOKEN); prints "status N", "content-type ...",
                                       then one "name{label=value} value" line per sample, sorted, as
                                       prometheus_client.parser.text_string_to_metric_families parsed it
                                       (the families with their HELP and TYPE: "family NAME TYPE")
    metrics.py traffic WSURL HTTPURL   3 websockets clients, 30 text messages each ("msg-00".."msg-29") and
                                       their 30 echoes; the first closes with 4001, the others with 1000;
                                       then one handshake to WSURL + "nope" (404) and a plain GET of WSURL
                                       (426); then scrapes HTTPURL until no client is connected (5 s at
                                       most) and prints the samples as `scrape` does, "scrapes N" last
"""
import asyncio
import sys
import time
import urllib.error
import urllib.request

import websockets
from prometheus_client.parser import text_string_to_metric_families


def get(url, token=None, method="GET"):
    request = urllib.request.Request(url, method=method)
    if token:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, answer.headers.get("Content-Type", ""), answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read().decode()


def samples(text):
    lines = []
    for family in text_string_to_metric_families(text):
        if not family.documentation:
            raise SystemExit("no HELP for " + family.name)
        lines.append(f"family {family.name} {family.type}")
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            value = int(sample.value) if sample.value == int(sample.value) and "start_time" not in sample.name else sample.value
            lines.append(f"{sample.name}{{{labels}}} {value}")
    return sorted(lines)


def scrape(url, token=None):
    status, kind, body = get(url, token)
    print(f"status {status}")
    print(f"content-type {kind}")
    if status == 200:
        print("\n".join(samples(body)))


async def client(url, code):
    async with websockets.connect(url) as ws:
        for i in range(30):
            await ws.send(f"msg-{i:02d}")
        for i in range(30):
            assert await ws.recv() == f"msg-{i:02d}"
        await ws.close(code)


async def traffic(wsurl, httpurl):
    await asyncio.wait_for(asyncio.gather(client(wsurl, 4001), client(wsurl, 1000), client(wsurl, 1000)), 20)
    try:
        async with websockets.connect(wsurl + "nope"):
            raise SystemExit("the wrong path was accepted")
    except websockets.exceptions.InvalidStatus as error:
        assert error.response.status_code == 404, error
    status, _, _ = get(wsurl.replace("ws://", "http://"))
    assert status == 426, status
    scrapes = 0
    deadline = time.monotonic() + 5
    while True:
        status, _, body = get(httpurl)
        scrapes += 1
        lines = samples(body)
        if "wspipe_clients_connected{} 0" in lines or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    print("\n".join(lines))
    print(f"scrapes {scrapes}")


if __name__ == "__main__":
    if sys.argv[1] == "scrape":
        scrape(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
    elif sys.argv[1] == "traffic":
        asyncio.run(traffic(sys.argv[2], sys.argv[3]))
