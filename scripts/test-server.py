"""Starts a test server on 127.0.0.1, on a free port, and prints its process
id and port, then exits; the caller stops it with `kill PID`. Both honour
put-if-absent (`If-None-Match: *`) under concurrency, which the
repository's conditional writes rely on.

    python scripts/test-server.py s3
        moto in server mode (from PyPI), with the bucket `tablepin-test`
    python scripts/test-server.py azure PATH/TO/azurite-blob DATA_DIR
        the Azure Blob Storage emulator (Azurite, from the npm registry),
        with the container `tablepin-test`
"""

import os
import socket
import subprocess
import sys
import time
import urllib.request

NAME = "tablepin-test"
# The Azure emulator's well-known development account (public, in Azure's docs).
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(argv, ready) -> int:
    """Runs `argv` detached and waits until `ready()` stops raising."""
    log = open(os.environ.get("TABLEPIN_SERVER_LOG", os.devnull), "ab")
    proc = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    for _ in range(300):
        try:
            ready()
            return proc.pid
        except Exception:  # not listening yet
            if proc.poll() is not None:
                sys.exit(f"{argv[0]} exited with code {proc.returncode}")
            time.sleep(0.1)
    proc.kill()
    sys.exit(f"{argv[0]} did not answer within 30 s")


def s3(port: int) -> int:
    server = os.path.join(os.path.dirname(sys.executable), "moto_server")
    url = f"http://127.0.0.1:{port}"
    pid = start([server, "-H", "127.0.0.1", "-p", str(port)],
                lambda: urllib.request.urlopen(f"{url}/moto-api/", timeout=1))
    # Creating a bucket is a plain PUT on the path (path-style addressing).
    urllib.request.urlopen(urllib.request.Request(f"{url}/{NAME}", method="PUT"), timeout=10)
    return pid


def azure(port: int, azurite: str, data: str) -> int:
    from azure.storage.blob import BlobServiceClient

    conn = (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
            f"BlobEndpoint=http://127.0.0.1:{port}/{ACCOUNT};")
    argv = [azurite, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", data,
            "--silent", "--skipApiVersionCheck"]
    return start(argv, lambda: BlobServiceClient.from_connection_string(conn).create_container(NAME))


def main() -> int:
    port = free_port()
    kind = sys.argv[1] if len(sys.argv) > 1 else ""
    if kind == "s3":
        pid = s3(port)
    elif kind == "azure" and len(sys.argv) == 4:
        pid = azure(port, sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
    print(pid, port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
