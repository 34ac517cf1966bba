/* SVG flame graphs: one folded profile, or the difference of two.
 *
 * The output is one self-contained SVG file (inline CSS and a small inline
 * script, no network) that a browser opens directly:
 *   - click a frame to zoom to it (its ancestors stay, greyed, below it);
 *     "Reset zoom" or Escape goes back;
 *   - the search box (or Ctrl-F) takes a regular expression, highlights the
 *     matching frames and prints the share of the total they cover, counting
 *     nested matches once;
 *   - hovering a frame shows its name, value and share, in the tooltip and in
 *     the details line at the bottom.
 * The root ("all") is at the bottom, callers below callees, siblings sorted by
 * name so equal profiles draw identically, as flamegraph.pl draws them.
 *
 * Size stays bounded on huge profiles: a frame narrower than MIN_WIDTH pixels
 * is not drawn on its own; the narrow children of a frame are merged into one
 * "[N small frames]" block placed after their wider siblings (their subtrees
 * are not drawn). Every level therefore holds at most WIDTH / MIN_WIDTH
 * blocks, whatever the profile.
 *
 * Differential mode (query_render_svg_diff): widths come from the second
 * profile (B, "after"); each frame is coloured by its change B - A in
 * cumulative value, red for growth and blue for shrinkage, the shade
 * proportional to the change relative to the largest change. Paths present
 * only in A have zero width and are not drawn (the totals line says how much
 * A had); text and collapsed diffs list them.
 *
 * Names are arbitrary bytes: they are decoded as strict UTF-8 and anything
 * XML 1.0 cannot carry (invalid sequences, surrogates, control characters)
 * becomes U+FFFD before escaping. */
#include "query/query.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WIDTH 1200.0     /* drawing width in pixels, without the side margins */
#define PAD 10.0         /* left and right margin */
#define FRAME_H 16.0     /* frame height; 1 px gap included */
#define HEADER_H 60.0    /* title, totals, search box */
#define FOOTER_H 34.0    /* details line */
#define MIN_WIDTH 0.1    /* narrower frames are merged (pixels) */
#define SMALL_NAME "[small frames]"

struct fnode {
    const char *name;  /* interned in tree.names */
    uint32_t parent;
    uint32_t child;    /* first child, 0 = none (node 0 is the root, never a child) */
    uint32_t next;     /* next sibling, 0 = none */
    uint32_t depth;
    double v;          /* value in the drawn profile (B in diffs) */
    double base;       /* value in A (diffs only) */
};

struct tree {
    struct hp_arena arena;
    struct hp_strtab names;
    struct hp_map64 index;   /* hash(parent, name) -> node, probed */
    struct hp_map64 renames; /* folded name pointer -> index in rn_names */
    const char **rn_names;   /* the tree's interned copy of each folded name */
    size_t rn_len, rn_cap;
    struct fnode *n;
    size_t len, cap;
};

static void tree_init(struct tree *t)
{
    memset(t, 0, sizeof(*t));
    hp_arena_init(&t->arena);
    hp_strtab_init(&t->names, &t->arena);
    hp_map64_init(&t->index);
    hp_map64_init(&t->renames);
    t->n = hp_xgrow(NULL, &t->cap, 1, sizeof(*t->n));
    t->n[0] = (struct fnode){ .name = hp_strtab_intern(&t->names, "all", 3) };
    t->len = 1;
}

static void tree_release(struct tree *t)
{
    free(t->n);
    free(t->rn_names);
    hp_map64_release(&t->index);
    hp_map64_release(&t->renames);
    hp_strtab_release(&t->names);
    hp_arena_release(&t->arena);
}

static uint32_t tree_child(struct tree *t, uint32_t parent, const char *name)
{
    uint64_t h = hp_hash_u64(((uint64_t)parent << 32) ^ (uint64_t)(uintptr_t)name);
    for (uint64_t key = h;; key++) {
        uint32_t idx;
        if (!hp_map64_get(&t->index, key, &idx)) {
            t->n = hp_xgrow(t->n, &t->cap, t->len + 1, sizeof(*t->n));
            idx = (uint32_t)t->len++;
            t->n[idx] = (struct fnode){ .name = name,
                                        .parent = parent,
                                        .depth = t->n[parent].depth + 1,
                                        .next = t->n[parent].child };
            t->n[parent].child = idx;
            (void)hp_map64_put(&t->index, key, idx, &idx);
            return idx;
        }
        if (t->n[idx].parent == parent && t->n[idx].name == name)
            return idx;
    }
}

/* Add a folded profile's entries to the tree, into v (side 1) or base (0). */
static void tree_add(struct tree *t, const struct query_folded *f, enum profile_value pv,
                     int side)
{
    /* The tree's own interning makes names from two folded profiles (with
     * separate string tables) the same pointers. */
    struct hp_map64 *rn = &t->renames;
    for (size_t i = 0; i < f->nentries; i++) {
        const struct query_fold_entry *e = &f->entries[i];
        const char *const *names = query_fold_frames(f, e);
        double val = e->value[pv];
        uint32_t cur = 0;
        if (side)
            t->n[0].v += val;
        else
            t->n[0].base += val;
        for (uint32_t k = 0; k < e->n; k++) {
            uint32_t ni;
            const char *name;
            if (hp_map64_get(rn, (uint64_t)(uintptr_t)names[k], &ni)) {
                name = t->rn_names[ni];
            } else {
                name = hp_strtab_intern(&t->names, names[k], strlen(names[k]));
                t->rn_names = hp_xgrow(t->rn_names, &t->rn_cap, t->rn_len + 1,
                                       sizeof(*t->rn_names));
                t->rn_names[t->rn_len] = name;
                (void)hp_map64_put(rn, (uint64_t)(uintptr_t)names[k], (uint32_t)t->rn_len, &ni);
                t->rn_len++;
            }
            cur = tree_child(t, cur, name);
            if (side)
                t->n[cur].v += val;
            else
                t->n[cur].base += val;
        }
    }
}

static int node_cmp(const void *a, const void *b, void *ctx)
{
    const struct fnode *n = ctx;
    const struct fnode *x = &n[*(const uint32_t *)a], *y = &n[*(const uint32_t *)b];
    if (x->parent != y->parent)
        return x->parent < y->parent ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Relink every node's children in name order. */
static void tree_sort(struct tree *t)
{
    size_t n = t->len;
    uint32_t *ord = hp_xmalloc(n * sizeof(*ord));
    for (size_t i = 0; i < n; i++)
        ord[i] = (uint32_t)i;
    if (n > 2)
        qsort_r(ord + 1, n - 1, sizeof(*ord), node_cmp, t->n);
    for (size_t i = 0; i < n; i++)
        t->n[i].child = t->n[i].next = 0;
    /* Walk backwards so prepending leaves each list in ascending order. */
    for (size_t i = n; i-- > 1;) {
        struct fnode *c = &t->n[ord[i]];
        c->next = t->n[c->parent].child;
        t->n[c->parent].child = ord[i];
    }
    free(ord);
}

/* ---- XML text ---- */

/* Decode one strict UTF-8 sequence at s; returns its length and the code
 * point, or 0 when the bytes are not a valid XML character. */
static size_t utf8_char(const unsigned char *s, uint32_t *ret)
{
    unsigned char c = s[0];
    uint32_t cp;
    size_t n;
    if (c < 0x80) {
        *ret = c;
        return c >= 0x20 || c == '\t' ? 1 : 0;
    }
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, cp = c & 0x07;
    else
        return 0;
    for (size_t k = 1; k < n; k++) {
        if ((s[k] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[k] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp == 0xfffe || cp == 0xffff)
        return 0;
    *ret = cp;
    return n;
}

/* Append s escaped for XML text and attribute values, at most `max` bytes of
 * input (0 = all); an ellipsis marks truncation. */
static void xml_text(struct hp_buf *out, const char *s, size_t max)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (p[i]) {
        if (max && i >= max) {
            hp_buf_puts(out, "..");
            return;
        }
        uint32_t cp;
        size_t n = utf8_char(p + i, &cp);
        if (n == 0) {
            hp_buf_puts(out, "\xef\xbf\xbd");
            i++;
            continue;
        }
        switch (cp) {
        case '&':
            hp_buf_puts(out, "&amp;");
            break;
        case '<':
            hp_buf_puts(out, "&lt;");
            break;
        case '>':
            hp_buf_puts(out, "&gt;");
            break;
        case '"':
            hp_buf_puts(out, "&quot;");
            break;
        case '\'':
            hp_buf_puts(out, "&#39;");
            break;
        default:
            hp_buf_append(out, p + i, n);
        }
        i += n;
    }
}

static bool is_bytes(enum profile_value v)
{
    return v == PV_INUSE_SPACE || v == PV_ALLOC_SPACE;
}

static const char *fmt_value(enum profile_value v, double x, char *buf, size_t n)
{
    if (x < 0) {
        char tmp[48];
        const char *s = is_bytes(v) ? hp_fmt_bytes(-x, tmp, sizeof(tmp))
                                    : hp_fmt_count(-x, tmp, sizeof(tmp));
        snprintf(buf, n, "-%s", s);
        return buf;
    }
    return is_bytes(v) ? hp_fmt_bytes(x, buf, n) : hp_fmt_count(x, buf, n);
}

/* ---- drawing ---- */

struct draw {
    struct hp_buf *out;
    const struct tree *t;
    const struct query_opts *o;
    bool diff;
    double total;     /* root value (B) */
    double scale;     /* pixels per unit of value */
    double max_delta; /* diffs: largest |B - A| of any frame */
    uint32_t max_depth;
    size_t frames;    /* drawn */
    double height;
};

static void frame_color(const struct draw *d, const char *name, double v, double base,
                        char *buf, size_t n)
{
    if (d->diff) {
        double delta = v - base;
        double k = d->max_delta > 0 ? fabs(delta) / d->max_delta : 0;
        int c = (int)(220.0 - 190.0 * sqrt(k)); /* sqrt: small changes stay visible */
        if (delta > 0)
            snprintf(buf, n, "rgb(255,%d,%d)", c, c);
        else if (delta < 0)
            snprintf(buf, n, "rgb(%d,%d,255)", c, c);
        else
            snprintf(buf, n, "rgb(230,230,230)");
        return;
    }
    /* flamegraph.pl's "hot" palette, keyed by name so a function keeps its
     * colour across renders. */
    uint64_t h = hp_hash_bytes(name, strlen(name), 0x666c616d65u);
    int r = 205 + (int)(h % 51);
    int g = (int)((h >> 8) % 231);
    int b = (int)((h >> 16) % 56);
    snprintf(buf, n, "rgb(%d,%d,%d)", r, g, b);
}

static void draw_frame(struct draw *d, const char *name, double x_units, uint32_t depth,
                       double v, double base, size_t merged)
{
    struct hp_buf *out = d->out;
    enum profile_value pv = d->o->sample;
    double x = x_units * d->scale, w = v * d->scale;
    double y = d->height - FOOTER_H - (depth + 1) * FRAME_H;
    char fill[40], a[48], b[48], c[48];
    frame_color(d, name, v, base, fill, sizeof(fill));
    hp_buf_printf(out, "<g class=\"f\" data-x=\"%.2f\" data-w=\"%.2f\" data-d=\"%u\"><title>", x,
                  w, depth);
    if (merged) {
        hp_buf_printf(out, "[%zu small frames]", merged);
    } else {
        xml_text(out, name, 0);
    }
    double share = d->total != 0 ? 100.0 * v / d->total : 0;
    hp_buf_printf(out, "\n%s, %.2f%%", fmt_value(pv, v, a, sizeof(a)), share);
    if (d->diff) {
        double delta = v - base;
        hp_buf_printf(out, "; was %s, change %s%s", fmt_value(pv, base, b, sizeof(b)),
                      delta > 0 ? "+" : "", fmt_value(pv, delta, c, sizeof(c)));
        if (base != 0)
            hp_buf_printf(out, " (%+.1f%%)", 100.0 * delta / fabs(base));
    }
    hp_buf_printf(out,
                  "</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
                  "fill=\"%s\" rx=\"2\"/><text x=\"%.2f\" y=\"%.1f\">",
                  PAD + x, y, w, FRAME_H - 1, fill, PAD + x + 3, y + FRAME_H - 5);
    /* Label: as many characters as fit at ~7 px each (the script redoes
     * this on zoom). */
    size_t fit = w > 6 ? (size_t)((w - 6) / 7) : 0;
    if (fit >= 3) {
        const char *label = merged ? SMALL_NAME : name;
        size_t len = strlen(label);
        xml_text(out, label, len <= fit ? 0 : fit - 2);
    }
    hp_buf_puts(out, "</text></g>\n");
    d->frames++;
}

/* Depth-first over the tree without recursion (stacks can be thousands of
 * frames deep). Children wider than MIN_WIDTH are drawn at their offsets;
 * the narrow ones are merged into one block after them. */
static void draw_tree(struct draw *d)
{
    const struct tree *t = d->t;
    struct item {
        uint32_t node;
        double x;
    } *stack = NULL;
    size_t sp = 0, cap = 0;
    stack = hp_xgrow(stack, &cap, 1, sizeof(*stack));
    stack[sp++] = (struct item){ 0, 0 };
    while (sp) {
        struct item it = stack[--sp];
        const struct fnode *n = &t->n[it.node];
        draw_frame(d, n->name, it.x, n->depth, n->v, n->base, 0);
        double cx = it.x;
        double small_v = 0, small_base = 0;
        size_t small_n = 0;
        for (uint32_t c = n->child; c; c = t->n[c].next) {
            const struct fnode *ch = &t->n[c];
            double v = ch->v > 0 ? ch->v : 0;
            if (v * d->scale < MIN_WIDTH) {
                small_v += v;
                small_base += ch->base;
                small_n += ch->v > 0 || ch->base != 0;
                continue;
            }
            stack = hp_xgrow(stack, &cap, sp + 1, sizeof(*stack));
            stack[sp++] = (struct item){ c, cx };
            cx += v;
        }
        if (small_n && small_v * d->scale >= MIN_WIDTH)
            draw_frame(d, SMALL_NAME, cx, n->depth + 1, small_v, small_base, small_n);
    }
    free(stack);
}

/* Deepest level that will be drawn, and the largest change (diffs), in one
 * pass with the same width rule as draw_tree. */
static void measure(struct draw *d)
{
    const struct tree *t = d->t;
    uint32_t *stack = NULL;
    size_t sp = 0, cap = 0;
    stack = hp_xgrow(stack, &cap, 1, sizeof(*stack));
    stack[sp++] = 0;
    while (sp) {
        const struct fnode *n = &t->n[stack[--sp]];
        if (n->depth > d->max_depth)
            d->max_depth = n->depth;
        double delta = fabs(n->v - n->base);
        if (n->depth > 0 && delta > d->max_delta)
            d->max_delta = delta;
        bool small = false;
        for (uint32_t c = n->child; c; c = t->n[c].next) {
            const struct fnode *ch = &t->n[c];
            if ((ch->v > 0 ? ch->v : 0) * d->scale < MIN_WIDTH) {
                small = true;
                continue;
            }
            stack = hp_xgrow(stack, &cap, sp + 1, sizeof(*stack));
            stack[sp++] = c;
        }
        if (small && n->depth + 1 > d->max_depth)
            d->max_depth = n->depth + 1;
    }
    free(stack);
}

static const char svg_css[] =
    "text{font-family:Verdana,sans-serif;font-size:12px;fill:#000}\n"
    ".f text{pointer-events:none}\n"
    ".f:hover rect{stroke:#000;stroke-width:0.5;cursor:pointer}\n"
    ".f.hit rect{fill:rgb(230,0,230)}\n"
    ".f.parent rect{opacity:0.5}\n"
    "#title{font-size:17px;text-anchor:middle}\n"
    "#unzoom{cursor:pointer;fill:#1a0dab}\n"
    "#matched{text-anchor:end}\n";

/* The script works from each frame's data-x/data-w (pixels at full zoom)
 * and data-d (depth); names are the first line of each <title>. */
static const char svg_js[] =
    "(function(){\"use strict\";\n"
    "var svg=document.documentElement,W=+svg.getAttribute(\"data-width\"),PAD=+svg.getAttribute("
    "\"data-pad\"),\n"
    " total=+svg.getAttribute(\"data-total\"),bytes=svg.getAttribute(\"data-unit\")===\"bytes\";\n"
    "var frames=Array.prototype.slice.call(document.querySelectorAll(\"g.f\"));\n"
    "var details=document.getElementById(\"details\"),matched=document.getElementById(\"matched\"),"
    "unz=document.getElementById(\"unzoom\"),box=document.getElementById(\"search\");\n"
    "function fmt(v){var u=bytes?[\"B\",\"KiB\",\"MiB\",\"GiB\",\"TiB\"]:[\"\",\"k\",\"M\",\"G\",\"T\"]"
    ",k=bytes?1024:1000,i=0,a=Math.abs(v);\n"
    " while(a>=k&&i<u.length-1){a/=k;v/=k;i++;}return (i?v.toFixed(2):Math.round(v))+(bytes?\" \":\"\")+u[i];}\n"
    "function nameOf(g){return g.querySelector(\"title\").textContent.split(\"\\n\")[0];}\n"
    "function place(g,x,w){var r=g.querySelector(\"rect\"),t=g.querySelector(\"text\"),n=nameOf(g),"
    "c=Math.floor((w-6)/7);\n"
    " r.setAttribute(\"x\",x.toFixed(2));r.setAttribute(\"width\",Math.max(w,0).toFixed(2));"
    "t.setAttribute(\"x\",(x+3).toFixed(2));\n"
    " if(n.charAt(0)===\"[\"&&/ small frames\\]$/.test(n))n=\"[small frames]\";\n"
    " t.textContent=c<3?\"\":n.length<=c?n:n.substr(0,c-2)+\"..\";}\n"
    "function zoom(z){var zx=+z.dataset.x,zw=+z.dataset.w,zd=+z.dataset.d,s=W/zw,e=1e-6;\n"
    " if(!(zw>0))return;unz.style.display=\"\";\n"
    " frames.forEach(function(g){var x=+g.dataset.x,w=+g.dataset.w,d=+g.dataset.d;\n"
    "  if(d<zd&&x<=zx+e&&x+w>=zx+zw-e){g.style.display=\"\";g.classList.add(\"parent\");"
    "place(g,PAD,W);}\n"
    "  else if(d>=zd&&x>=zx-e&&x+w<=zx+zw+e){g.style.display=\"\";g.classList.remove(\"parent\");"
    "place(g,PAD+(x-zx)*s,w*s);}\n"
    "  else g.style.display=\"none\";});}\n"
    "function unzoom(){unz.style.display=\"none\";frames.forEach(function(g){g.style.display=\"\";"
    "g.classList.remove(\"parent\");\n"
    " place(g,PAD+ +g.dataset.x,+g.dataset.w);});}\n"
    "function search(q){var re=null,iv=[],sum=0,end=-1;\n"
    " if(q){try{re=new RegExp(q);}catch(err){re=new RegExp(q.replace(/[.*+?^${}()|[\\]\\\\]/g,"
    "\"\\\\$&\"));}}\n"
    " frames.forEach(function(g){var hit=!!re&&+g.dataset.d>0&&re.test(nameOf(g));"
    "g.classList.toggle(\"hit\",hit);\n"
    "  if(hit)iv.push([+g.dataset.x,+g.dataset.x+ +g.dataset.w]);});\n"
    " iv.sort(function(a,b){return a[0]-b[0];});\n"
    " iv.forEach(function(v){if(v[0]>=end){sum+=v[1]-v[0];end=v[1];}else if(v[1]>end){"
    "sum+=v[1]-end;end=v[1];}});\n"
    " matched.textContent=re?\"Matched: \"+(100*sum/W).toFixed(2)+\"% (\"+fmt(total*sum/W)+\")\":\"\";}\n"
    "svg.addEventListener(\"click\",function(e){var g=e.target.closest&&e.target.closest(\"g.f\");"
    "if(g)zoom(g);});\n"
    "svg.addEventListener(\"mouseover\",function(e){var g=e.target.closest&&e.target.closest(\"g.f\");\n"
    " details.textContent=g?g.querySelector(\"title\").textContent.replace(\"\\n\",\" \\u2014 \"):"
    "\"\\u00a0\";});\n"
    "unz.addEventListener(\"click\",function(e){e.stopPropagation();unzoom();});\n"
    "if(box)box.addEventListener(\"input\",function(){search(box.value);});\n"
    "document.addEventListener(\"keydown\",function(e){\n"
    " if(e.key===\"Escape\"){if(box)box.value=\"\";search(\"\");unzoom();}\n"
    " else if((e.ctrlKey||e.metaKey)&&e.key===\"f\"&&box){e.preventDefault();box.focus();}});\n"
    "})();\n";

static int render(const struct query_folded *a, const struct query_folded *b,
                  const struct query_opts *o, struct hp_buf *out)
{
    struct tree t;
    tree_init(&t);
    enum profile_value pv = o->sample;
    bool diff = a != NULL;
    if (diff)
        tree_add(&t, a, pv, 0);
    tree_add(&t, b, pv, 1);
    tree_sort(&t);

    struct draw d = { .out = out, .t = &t, .o = o, .diff = diff };
    d.total = t.n[0].v;
    d.scale = d.total > 0 ? WIDTH / d.total : 0;
    measure(&d);
    d.height = HEADER_H + (d.max_depth + 1) * FRAME_H + FOOTER_H;
    double full_w = WIDTH + 2 * PAD;

    hp_buf_printf(out,
                  "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" "
                  "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" data-width=\"%.0f\" "
                  "data-pad=\"%.0f\" data-total=\"%.0f\" data-unit=\"%s\">\n",
                  full_w, d.height, full_w, d.height, WIDTH, PAD, d.total,
                  is_bytes(pv) ? "bytes" : "count");
    hp_buf_printf(out, "<style type=\"text/css\"><![CDATA[\n%s]]></style>\n", svg_css);
    hp_buf_printf(out,
                  "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#f8f8f0\"/>\n",
                  full_w, d.height);
    hp_buf_printf(out, "<text id=\"title\" x=\"%.0f\" y=\"22\">", full_w / 2);
    if (o->title && *o->title)
        xml_text(out, o->title, 0);
    else
        hp_buf_puts(out, diff ? "Heap difference (B - A)" : "Heap flame graph");
    hp_buf_puts(out, "</text>\n");
    char x1[48], x2[48], x3[48];
    hp_buf_printf(out, "<text id=\"totals\" x=\"%.0f\" y=\"44\">%s total: %s", PAD,
                  profile_value_name(pv), fmt_value(pv, d.total, x1, sizeof(x1)));
    if (diff) {
        double base = t.n[0].base;
        hp_buf_printf(out, " (A: %s, change %s%s); red grew, blue shrank; widths are B",
                      fmt_value(pv, base, x2, sizeof(x2)), d.total - base > 0 ? "+" : "",
                      fmt_value(pv, d.total - base, x3, sizeof(x3)));
    }
    hp_buf_printf(out, "</text>\n<text id=\"unzoom\" x=\"%.0f\" y=\"44\" style=\"display:none\">"
                       "Reset zoom</text>\n",
                  PAD + 520);
    hp_buf_printf(out,
                  "<foreignObject x=\"%.0f\" y=\"6\" width=\"250\" height=\"26\">"
                  "<input xmlns=\"http://www.w3.org/1999/xhtml\" id=\"search\" type=\"search\" "
                  "placeholder=\"Search (regex), Ctrl-F\" style=\"width:240px\"/>"
                  "</foreignObject>\n",
                  full_w - PAD - 250);
    hp_buf_printf(out, "<text id=\"matched\" x=\"%.0f\" y=\"44\"></text>\n", full_w - PAD);
    hp_buf_puts(out, "<g id=\"frames\">\n");
    if (d.total > 0)
        draw_tree(&d);
    hp_buf_puts(out, "</g>\n");
    hp_buf_printf(out, "<text id=\"details\" x=\"%.0f\" y=\"%.0f\">\xc2\xa0</text>\n", PAD,
                  d.height - 12);
    hp_buf_printf(out, "<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n</svg>\n",
                  svg_js);
    tree_release(&t);
    return 0;
}

int query_render_svg(const struct query_folded *f, const struct query_opts *o,
                     struct hp_buf *out)
{
    return render(NULL, f, o, out);
}

int query_render_svg_diff(const struct query_folded *a, const struct query_folded *b,
                          const struct query_opts *o, struct hp_buf *out)
{
    return render(a, b, o, out);
}
