-- PostgreSQL's migration 0008 compresses large read-model values with lz4;
-- SQLite does not compress values, so there is nothing to change here. The
-- file keeps the two back ends' migration numbers in step.
SELECT 1;
