"""A real S3-compatible object store on loopback for tests: moto's server, as s3fs and pyarrow test against.

The store speaks the S3 HTTP protocol on 127.0.0.1; the project reaches it only the way a user reaches MinIO or a
lab's store: the standard `AWS_*` variables (`AWS_ENDPOINT_URL` among them) or pyarrow's URI options.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow.fs as pafs
from moto.server import ThreadedMotoServer

HOST = "127.0.0.1"
# Credentials of the test store (moto accepts any); set as the AWS tools read them.
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "folklore-test", "AWS_SECRET_ACCESS_KEY": "folklore-test-secret",
               "AWS_DEFAULT_REGION": "us-east-1"}


@dataclass(frozen=True)
class ObjectStore:
    """A running store: its endpoint, and the environment a process needs to reach it as an AWS tool would."""

    port: int

    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def environment(self) -> dict[str, str]:
        """The variables that point AWS tools (and pyarrow) at this store."""
        return {**CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint_url}

    def uri_options(self) -> str:
        """pyarrow's own URI query for this store, for a location that needs no environment."""
        return f"endpoint_override={HOST}:{self.port}&scheme=http"

    def filesystem(self) -> pafs.S3FileSystem:
        return pafs.S3FileSystem(endpoint_override=f"{HOST}:{self.port}", scheme="http",
                                 access_key=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                                 secret_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"], allow_bucket_creation=True)

    def create_bucket(self, name: str) -> str:
        """Create bucket `name`; its `s3://` URI."""
        self.filesystem().create_dir(name)
        return f"s3://{name}"

    def keys(self, prefix: str) -> list[str]:
        """Every object under `prefix` (`bucket/path`), sorted."""
        selector = pafs.FileSelector(prefix, recursive=True, allow_not_found=True)
        return sorted(info.path for info in self.filesystem().get_file_info(selector)
                      if info.type == pafs.FileType.File)


@contextmanager
def running_object_store() -> Iterator[ObjectStore]:
    """Start moto's S3 server on a free loopback port with the AWS variables pointing at it, and stop it (and restore
    the environment) afterwards. Processes started meanwhile (Ray nodes, jobs) inherit the variables."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    server = ThreadedMotoServer(ip_address=HOST, port=0, verbose=False)
    server.start()
    store = ObjectStore(port=server._server.server_port)
    saved = {name: os.environ.get(name) for name in store.environment}
    os.environ.update(store.environment)
    try:
        yield store
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        server.stop()
