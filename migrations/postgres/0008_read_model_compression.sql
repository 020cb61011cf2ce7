-- Read-model values are rewritten on every batch that touches them, and a
-- debate's document grows past the size PostgreSQL compresses (about 2 kB):
-- with the default pglz, compressing them was the server's top cost under
-- load. lz4 compresses several times faster. It applies to values written
-- from now on; a server built without lz4 (or older than 14) keeps pglz.
DO $$
BEGIN
    EXECUTE 'ALTER TABLE documents ALTER COLUMN doc SET COMPRESSION lz4';
    EXECUTE 'ALTER TABLE projection_views ALTER COLUMN view SET COMPRESSION lz4';
    EXECUTE 'ALTER TABLE projection_states ALTER COLUMN state SET COMPRESSION lz4';
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'lz4 unavailable (%); read models keep the default compression', SQLERRM;
END $$;
