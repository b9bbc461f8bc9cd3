"""A client no one in this project wrote: Python grpcio, stubs generated from the .proto.

usage: client.py STUBS_DIR SOCKET_PATH
Calls GetHeadroom, then WatchHeadroom until it sees a Pod's throttling ratio, and prints one JSON
line per check for the Rust test to read.
"""
import json
import sys
import time

sys.path.insert(0, sys.argv[1])
import grpc  # noqa: E402
from headroom.v1 import headroom_pb2, headroom_pb2_grpc  # noqa: E402

# grpcio >= 1.57 sends the %-encoded socket path as :authority over a Unix socket, which is not
# a valid HTTP/2 authority and which hyper/h2 (tonic) rejects with RST_STREAM(PROTOCOL_ERROR)
# (grpc/grpc#38142). grpc-go, Kubernetes and grpcurl use "localhost"; so do we.
channel = grpc.insecure_channel("unix://" + sys.argv[2], options=[("grpc.default_authority", "localhost")])
stub = headroom_pb2_grpc.HeadroomStub(channel)

snap = stub.GetHeadroom(headroom_pb2.GetHeadroomRequest(include_pods=True), timeout=10)
print(json.dumps({
    "check": "get",
    "node_name": snap.node_name,
    "cpu_allocatable": snap.node.cpu_millis.allocatable,
    "cpu_headroom": snap.node.cpu_millis.headroom,
    "memory_allocatable": snap.node.memory_bytes.allocatable,
    "pods": [p.pod.uid for p in snap.pods],
}), flush=True)

# Bad input gets a status, not a crash.
try:
    stub.ListPods(headroom_pb2.ListPodsRequest(pod_uid="no-such-pod"), timeout=10)
    print(json.dumps({"check": "not_found", "code": "OK"}), flush=True)
except grpc.RpcError as e:
    print(json.dumps({"check": "not_found", "code": e.code().name, "message": e.details()}), flush=True)

print(json.dumps({"check": "watching"}), flush=True)
deadline = time.time() + 20
for msg in stub.WatchHeadroom(headroom_pb2.WatchHeadroomRequest(include_pods=True), timeout=20):
    for pod in msg.pods:
        for c in pod.containers:
            if c.pressure.HasField("cpu_throttled_ratio"):
                print(json.dumps({
                    "check": "watch",
                    "version": msg.version,
                    "pod": pod.pod.uid,
                    "container": c.name,
                    "throttled_ratio": c.pressure.cpu_throttled_ratio.value,
                    "stale": c.pressure.cpu_throttled_ratio.stale,
                }), flush=True)
                sys.exit(0)
    if time.time() > deadline:
        break
print(json.dumps({"check": "watch", "error": "no throttling seen"}), flush=True)
sys.exit(1)
