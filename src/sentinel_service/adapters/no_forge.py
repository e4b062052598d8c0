"""The forge of a process that has no forge adapter configured."""

from sentinel_domain.forge import ChangedFiles, CheckRun, ForgeDocument, ForgeUnavailable, PublishedCheck


class NoForge:
    """No forge adapter in this process: every call is ForgeUnavailable, so deliveries wait in the outbox."""

    def _none(self) -> ForgeUnavailable:
        return ForgeUnavailable("no forge adapter is configured in this process", retry_after_seconds=60)

    def changed_files(self, repository: str, base: str, head: str) -> ChangedFiles:
        raise self._none()

    def read_file(self, repository: str, revision: str, path: str) -> ForgeDocument:
        raise self._none()

    def publish_check(self, repository: str, check: CheckRun) -> PublishedCheck:
        raise self._none()
