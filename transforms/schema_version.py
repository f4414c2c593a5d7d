"""The corpus schema's version, apart from the table definitions so that it can be read without pyarrow."""

SCHEMA_VERSION = "4"  # 2: the redactions table; 3: sessions.git_repository; 4: sessions.started_at_inferred
