-- Hand-written Goose sessions (docs/agents/goose.md), inserted into a database made from schema.sql at test time
-- (tests/test_contract.py). Shapes as Goose writes them (crates/goose/src/session, conversation/message.rs):
-- created_at as SQLite's CURRENT_TIMESTAMP text (UTC), created_timestamp in epoch seconds (T = 1767348000 =
-- 2026-01-02T10:00:00Z). Message 2 is the hidden turn context Goose adds (userVisible false): never a turn.
INSERT INTO schema_version (version) VALUES (16);
INSERT INTO sessions (id, name, user_set_name, session_type, working_dir, created_at, updated_at,
  total_tokens, input_tokens, output_tokens, accumulated_total_tokens, accumulated_input_tokens,
  accumulated_output_tokens, accumulated_cache_read_tokens, accumulated_cache_write_tokens, accumulated_cost,
  provider_name, model_config_json)
VALUES ('20260102_1', 'List the files', 1, 'user', '/home/u/proj', '2026-01-02 10:00:00', '2026-01-02 10:01:02',
  985, 980, 5, 1925, 1880, 45, 1060, 0, NULL,
  'anthropic', '{"model_name":"claude-sonnet-4-5","context_limit":null}');
INSERT INTO messages (id, message_id, session_id, role, content_json, created_timestamp, metadata_json)
VALUES (1, 'msg_aaaa0001', '20260102_1', 'user', '[{"type":"text","text":"list the files in this folder"}]',
  1767348001, '{"userVisible":true,"agentVisible":true}');
INSERT INTO messages (id, message_id, session_id, role, content_json, created_timestamp, metadata_json)
VALUES (2, 'msg_aaaa0002', '20260102_1', 'user',
  '[{"type":"text","text":"<turn-context>Working directory: /home/u/proj</turn-context>"}]',
  1767348001, '{"userVisible":false,"agentVisible":true}');
INSERT INTO messages (id, message_id, session_id, role, content_json, created_timestamp, metadata_json)
VALUES (3, 'chatcmpl-101', '20260102_1', 'assistant',
  '[{"type":"thinking","thinking":"I should run ls.","signature":"sig"},{"type":"toolRequest","id":"call_01","toolCall":{"status":"success","value":{"name":"developer__shell","arguments":{"command":"ls"}}}}]',
  1767348004, '{"userVisible":true,"agentVisible":true}');
INSERT INTO messages (id, message_id, session_id, role, content_json, created_timestamp, metadata_json)
VALUES (4, 'msg_aaaa0004', '20260102_1', 'user',
  '[{"type":"toolResponse","id":"call_01","toolResult":{"status":"success","value":{"content":[{"type":"text","text":"README.md\nsrc\n"}]}}}]',
  1767348005, '{"userVisible":true,"agentVisible":true}');
INSERT INTO messages (id, message_id, session_id, role, content_json, created_timestamp, metadata_json)
VALUES (5, 'chatcmpl-102', '20260102_1', 'assistant',
  '[{"type":"text","text":"There are two entries: README.md and src."}]',
  1767348007, '{"userVisible":true,"agentVisible":true}');
INSERT INTO messages (id, message_id, session_id, role, content_json, created_timestamp, metadata_json)
VALUES (6, 'msg_aaaa0006', '20260102_1', 'user', '[{"type":"text","text":"thanks, that is all"}]',
  1767348060, '{"userVisible":true,"agentVisible":true}');
INSERT INTO messages (id, message_id, session_id, role, content_json, created_timestamp, metadata_json)
VALUES (7, 'chatcmpl-103', '20260102_1', 'assistant', '[{"type":"text","text":"You are welcome."}]',
  1767348062, '{"userVisible":true,"agentVisible":true}');
INSERT INTO usage_ledger (id, session_id, created_timestamp, model, input_tokens, output_tokens, total_tokens,
  cache_read_tokens, cache_write_tokens, cost, cost_source, is_compaction)
VALUES (1, '20260102_1', 1767348004, 'claude-sonnet-4-5', 900, 40, 940, 100, 0, NULL, NULL, 0);
INSERT INTO usage_ledger (id, session_id, created_timestamp, model, input_tokens, output_tokens, total_tokens,
  cache_read_tokens, cache_write_tokens, cost, cost_source, is_compaction)
VALUES (2, '20260102_1', 1767348062, 'claude-sonnet-4-5', 980, 5, 985, 960, 0, NULL, NULL, 0);
