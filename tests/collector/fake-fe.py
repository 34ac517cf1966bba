#!/usr/bin/env python3
"""A Doris/StarRocks FE impersonation for the discovery tests: a real HTTP
server on loopback answering GET /api/show_proc?path=/backends and
/compute_nodes with basic auth, in either shape the real FEs use.

  fake-fe.py PORTFILE SHAPE USER PASSWORD BACKENDS [COMPUTE_NODES]

SHAPE: objects (rows keyed by SHOW PROC column names, StarRocks and current
Doris), doris-rows (Doris 2.x positional rows with ArrowFlightSqlPort, in the
{"code":0,"data":...} envelope), doris11-rows (Doris 1.1 positional rows with
the Cluster column). BACKENDS / COMPUTE_NODES: files of lines
"ID HOST HTTPPORT ALIVE DECOMMISSIONED". Binds port 0 and writes the port to
PORTFILE. Runs until killed (the test kills it)."""
import base64
import http.server
import json
import os
import socketserver
import sys

portfile, shape, user, password, be_file = sys.argv[1:6]
cn_file = sys.argv[6] if len(sys.argv) > 6 else None


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.strip():
                i, host, port, alive, decom = line.split()
                rows.append((i, host, port, alive, decom))
    return rows


def table(rows, cn):
    out = []
    for i, host, port, alive, decom in rows:
        if shape == "objects":
            o = {"IP": host, "HeartbeatPort": "9050", "BePort": "9060", "HttpPort": port,
                 "BrpcPort": "8060", "LastStartTime": "2026-11-23 10:00:00",
                 "LastHeartbeat": "2026-11-23 19:00:00", "Alive": alive,
                 "SystemDecommissioned": decom, "ClusterDecommissioned": "false",
                 "TabletNum": "12", "Version": "3.3.0"}
            o["ComputeNodeId" if cn else "BackendId"] = i
            out.append(o)
        elif shape == "doris-rows":
            out.append([i, host, "9050", "9060", port, "8060", "8070", "2026-11-23 10:00:00",
                        "2026-11-23 19:00:00", alive, decom, "12", "1.0 GB"])
        else:  # doris11-rows
            out.append([i, "default_cluster", host, host, "9050", "9060", port, "8060",
                        "2026-11-23 10:00:00", "2026-11-23 19:00:00", alive, decom, "false", "12"])
    if shape == "objects":
        return out
    return {"msg": "success", "code": 0, "data": out, "count": 0}


class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        want = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        if self.headers.get("Authorization") != want:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="fe"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/api/show_proc?path=/backends":
            body = table(load(be_file), False)
        elif self.path == "/api/show_proc?path=/compute_nodes" and cn_file:
            body = table(load(cn_file), True)
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Server(http.server.HTTPServer):
    def server_bind(self):
        # HTTPServer's own server_bind asks DNS for the host's name (getfqdn),
        # which stalls on a machine without a resolver.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


srv = Server(("127.0.0.1", 0), H)
with open(portfile + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
