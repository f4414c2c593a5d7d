-- The tables of Kiro CLI's data.sqlite3 (docs/agents/kiro.md "Where the files are"). `migrations`, `history`,
-- `state`, `auth_kv` and `conversations` as the Amazon Q Developer CLI's migrations 000-007 create them
-- (aws/amazon-q-developer-cli crates/chat-cli/src/database/sqlite_migrations); `conversations_v2` as peers
-- describe Kiro CLI's (not in any public source: unconfirmed).
CREATE TABLE migrations (id INTEGER PRIMARY KEY, version INTEGER NOT NULL, migration_time INTEGER NOT NULL);
CREATE TABLE history (id INTEGER PRIMARY KEY, command TEXT, shell TEXT, pid INTEGER, session_id TEXT, cwd TEXT,
  time INTEGER, in_ssh INTEGER, in_docker INTEGER, hostname TEXT, exit_code INTEGER);
CREATE TABLE state (key TEXT PRIMARY KEY, value BLOB);
CREATE TABLE auth_kv (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE conversations (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE conversations_v2 (
  key TEXT NOT NULL,
  conversation_id TEXT NOT NULL,
  value TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (key, conversation_id)
);
