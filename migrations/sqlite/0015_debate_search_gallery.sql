-- Search on the debates list (`q` on GET /api/debates): the topic folded to
-- lower case (Unicode-aware, by the projection) so that both back ends
-- match case-insensitively with a plain LIKE. The `debates` projection is
-- version 3 from here on, so it rebuilds and fills the column.
ALTER TABLE debate_list ADD COLUMN topic_folded TEXT NOT NULL DEFAULT '';

-- The public gallery: one row per published debate, the gallery item as
-- served in `item`, newest publication first. Written by the `debates`
-- projection with its documents, like the list.
CREATE TABLE debate_gallery (
    debate_id TEXT NOT NULL PRIMARY KEY,
    sort_key  TEXT NOT NULL,
    item      TEXT NOT NULL
);
CREATE INDEX debate_gallery_order ON debate_gallery (sort_key);
