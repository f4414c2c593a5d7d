"""Publishing after a run: the nightly run's hook to `transcripts publish` (docs/team.md), kept free of Prefect so that
a no-op run, which starts no flow, can publish too (a publish that failed the night before is retried then)."""

from __future__ import annotations

import logging

from flows.etl.settings import Settings
from sinks import publish, remote

log = logging.getLogger("transcripts.etl")


def publish_after(settings: Settings) -> str:
    """Publish to the configured team folder; returns the line to show (never raises for a remote failure)."""
    label = settings.machine_label or publish.default_label()
    try:
        target = remote.open_target(str(settings.publish_url), settings.env)
        done = publish.publish(settings.data_dir, target, label, publish.Level(settings.publish_level))
    except remote.RemoteError as exc:
        log.warning("event=publish_failed machine=%s error=%s", label, exc)
        return f"publish failed (the run's corpus is committed; the next run tries again): {exc}"
    log.info("event=published machine=%s sent=%d bytes=%d", label, done.uploaded, done.bytes_sent)
    return (
        f"published to {settings.publish_url} as {label} ({done.level}): "
        f"{done.uploaded} of {done.files} files sent, {done.bytes_sent / 1e6:.1f} MB"
    )
