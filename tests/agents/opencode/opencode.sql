-- A hand-written OpenCode database (drizzle schema, FORMATS.md 5.3): one session, two exchanges, one tool call.
-- Built into a temporary folder at test time (tests/test_contract.py); times are epoch ms (T = 2026-01-02T10:00:00Z).
CREATE TABLE project (
  id text PRIMARY KEY, worktree text NOT NULL, vcs text, name text, icon_url text, icon_url_override text,
  icon_color text, time_created integer NOT NULL, time_updated integer NOT NULL, time_initialized integer,
  sandboxes text NOT NULL, commands text
);
CREATE TABLE session (
  id text PRIMARY KEY, project_id text NOT NULL, parent_id text, slug text NOT NULL, directory text NOT NULL,
  path text, title text NOT NULL, version text NOT NULL, share_url text, summary_additions integer,
  summary_deletions integer, summary_files integer, summary_diffs text, cost real DEFAULT 0 NOT NULL,
  tokens_input integer DEFAULT 0 NOT NULL, tokens_output integer DEFAULT 0 NOT NULL,
  tokens_reasoning integer DEFAULT 0 NOT NULL, tokens_cache_read integer DEFAULT 0 NOT NULL,
  tokens_cache_write integer DEFAULT 0 NOT NULL, revert text, permission text,
  time_created integer NOT NULL, time_updated integer, time_compacting integer, time_archived integer,
  FOREIGN KEY (project_id) REFERENCES project(id) ON DELETE CASCADE
);
CREATE TABLE message (
  id text PRIMARY KEY, session_id text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL,
  data text NOT NULL, FOREIGN KEY (session_id) REFERENCES session(id) ON DELETE CASCADE
);
CREATE INDEX message_session_time_created_id_idx ON message (session_id, time_created, id);
CREATE TABLE part (
  id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL, time_created integer NOT NULL,
  time_updated integer NOT NULL, data text NOT NULL,
  FOREIGN KEY (message_id) REFERENCES message(id) ON DELETE CASCADE
);
CREATE INDEX part_message_id_id_idx ON part (message_id, id);
CREATE INDEX part_session_idx ON part (session_id);
INSERT INTO project (id, worktree, time_created, time_updated, sandboxes) VALUES ('prj_1', '/home/u/proj', 1767348000000, 1767348000000, '[]');
INSERT INTO session (id, project_id, slug, directory, title, version, time_created, time_updated) VALUES ('ses_contract01', 'prj_1', 'list-files', '/home/u/proj', 'List the files', '1.2.3', 1767348000000, 1767348062000);
INSERT INTO message VALUES ('msg_001', 'ses_contract01', 1767348001000, 1767348001000, '{"role": "user", "time": {"created": 1767348001000}, "agent": "build", "model": {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"}}');
INSERT INTO part VALUES ('prt_001a', 'msg_001', 'ses_contract01', 1767348001000, 1767348001000, '{"type": "text", "text": "list the files in this folder"}');
INSERT INTO part VALUES ('prt_001b', 'msg_001', 'ses_contract01', 1767348001000, 1767348001000, '{"type": "text", "text": "<system-reminder>Plan mode is off.</system-reminder>", "synthetic": true}');
INSERT INTO message VALUES ('msg_002', 'ses_contract01', 1767348004000, 1767348004000, '{"role": "assistant", "time": {"created": 1767348004000, "completed": 1767348007000}, "modelID": "claude-sonnet-4-5", "providerID": "anthropic", "mode": "build", "agent": "build", "path": {"cwd": "/home/u/proj", "root": "/home/u/proj"}, "tokens": {"input": 900, "output": 40, "reasoning": 0, "cache": {"read": 100, "write": 0}}, "cost": 0}');
INSERT INTO part VALUES ('prt_002a', 'msg_002', 'ses_contract01', 1767348004000, 1767348004000, '{"type": "reasoning", "text": "I should run ls.", "time": {"start": 1767348004000, "end": 1767348004100}}');
INSERT INTO part VALUES ('prt_002b', 'msg_002', 'ses_contract01', 1767348004500, 1767348004500, '{"type": "tool", "callID": "call_01", "tool": "bash", "state": {"status": "completed", "input": {"command": "ls"}, "output": "README.md\nsrc\n", "title": "ls", "metadata": {}, "time": {"start": 1767348004500, "end": 1767348005000}}}');
INSERT INTO part VALUES ('prt_002c', 'msg_002', 'ses_contract01', 1767348006000, 1767348006000, '{"type": "text", "text": "There are two entries: README.md and src.", "time": {"start": 1767348006000, "end": 1767348007000}}');
INSERT INTO message VALUES ('msg_003', 'ses_contract01', 1767348060000, 1767348060000, '{"role": "user", "time": {"created": 1767348060000}, "agent": "build", "model": {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"}}');
INSERT INTO part VALUES ('prt_003a', 'msg_003', 'ses_contract01', 1767348060000, 1767348060000, '{"type": "text", "text": "thanks, that is all"}');
INSERT INTO message VALUES ('msg_004', 'ses_contract01', 1767348062000, 1767348062000, '{"role": "assistant", "time": {"created": 1767348062000, "completed": 1767348062500}, "modelID": "claude-sonnet-4-5", "providerID": "anthropic", "mode": "build", "agent": "build", "path": {"cwd": "/home/u/proj", "root": "/home/u/proj"}, "tokens": {"input": 980, "output": 5, "reasoning": 0, "cache": {"read": 960, "write": 0}}, "cost": 0}');
INSERT INTO part VALUES ('prt_004a', 'msg_004', 'ses_contract01', 1767348062000, 1767348062000, '{"type": "text", "text": "You are welcome."}');
