"""A real S3 endpoint for tests: moto's server mode (it speaks the S3 HTTP API), started on a free port and stopped
whatever happens; with request signing checked (IAM on), so that wrong credentials are refused as by AWS."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

BUCKET = "team"


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str
    access_key: str
    secret_key: str
    log: Path  # the server's request log: one line per HTTP request

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a process that uses the endpoint (the standard AWS variables)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(
            AWS_ENDPOINT_URL=self.url,
            AWS_ACCESS_KEY_ID=self.access_key,
            AWS_SECRET_ACCESS_KEY=self.secret_key,
            AWS_REGION="us-east-1",
            AWS_EC2_METADATA_DISABLED="true",
            # never the real home's ~/.aws: a test sees only the credentials it gives
            AWS_SHARED_CREDENTIALS_FILE=str(self.log.parent / "no-aws-credentials"),
            AWS_CONFIG_FILE=str(self.log.parent / "no-aws-config"),
        )
        env.update(extra)
        return env

    def requests(self) -> list[str]:
        """The request lines the server has logged so far ("GET /team?list-type=2..."), once it has been quiet."""
        last = -1
        lines: list[str] = []
        for _ in range(50):
            lines = [
                line for line in self.log.read_text(encoding="utf-8").splitlines() if '" ' in line and "HTTP/" in line
            ]
            if len(lines) == last:
                break
            last = len(lines)
            time.sleep(0.1)
        return [line.split('"')[1] for line in lines]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def refusing_port() -> Iterator[int]:
    """A port no one answers on for the block: bound and held, never listened on, so a connection is refused (an
    endpoint that is down) and no server started meanwhile (another test's moto) can take it, as a port found free
    and let go could be."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


@contextlib.contextmanager
def s3_endpoint(folder: Path) -> Iterator[Endpoint]:
    """Start moto's S3 server, create a user with a key and the bucket `team`, yield; the server is stopped (and
    waited for) however the block ends."""
    import boto3  # moto's own dependency

    port = free_port()
    log = folder / "moto.log"
    # The first 4 requests are let through unsigned: they create the user, its policy, its key and the bucket.
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "4"}
    with open(log, "w", encoding="utf-8") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=out, env=env
        )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError(f"moto server did not start: {log.read_text(encoding='utf-8')}") from None
                time.sleep(0.1)
        anon = {"endpoint_url": url, "region_name": "us-east-1", "aws_access_key_id": "x", "aws_secret_access_key": "x"}
        iam = boto3.client("iam", **anon)
        iam.create_user(UserName="tester")
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        iam.put_user_policy(UserName="tester", PolicyName="all", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="tester")["AccessKey"]
        endpoint = Endpoint(url, key["AccessKeyId"], key["SecretAccessKey"], log)
        client(endpoint).create_bucket(Bucket=BUCKET)
        yield endpoint
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def client(endpoint: Endpoint) -> object:
    """A boto3 S3 client with the endpoint's user: what the tests look into the bucket with."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint.url,
        region_name="us-east-1",
        aws_access_key_id=endpoint.access_key,
        aws_secret_access_key=endpoint.secret_key,
    )
