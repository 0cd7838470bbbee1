# Appends translated messages to OUTDIR/<lang>.txt: python3 mo_paragraphs.py OUTDIR el,ar,... BYTES
import os, sys, gettext, re, unicodedata
out = sys.argv[1]
langs = sys.argv[2].split(',')
LIMIT = int(sys.argv[3])
for l in langs:
    d = '/usr/share/locale/%s/LC_MESSAGES' % l
    strs = []
    for f in sorted(os.listdir(d)):
        if not f.endswith('.mo'): continue
        try:
            t = gettext.GNUTranslations(open(os.path.join(d, f), 'rb'))
        except Exception:
            continue
        cat = t._catalog
        for k in sorted(cat, key=lambda k: str(k)):
            v = cat[k]
            if not isinstance(v, str) or k == '' or 'Project-Id' in v: continue
            s = re.sub(r'%[-0-9.]*[a-zA-Z]|\$\{?\w+\}?|<[^>]+>|\\n', ' ', v)
            s = ' '.join(s.split())
            if len(s) < 100: continue
            letters = sum(1 for c in s if c.isalpha() or unicodedata.category(c).startswith('M'))
            if letters < 0.7 * len(s): continue
            if sum(1 for c in s if 'a' <= c.lower() <= 'z') > 0.3*letters and l in ('el','ar','he','hi','bg','th','fa','uk','ru','sr','ja','zh_CN','ko'): continue
            strs.append((f, s))
    # spread across domains
    by = {}
    for f, s in strs: by.setdefault(f, []).append(s)
    order = []
    i = 0
    while any(i < len(v) for v in by.values()):
        for f in sorted(by):
            if i < len(by[f]): order.append(by[f][i])
        i += 1
    paras, cur, total = [], '', 0
    for s in order:
        cur = (cur + ' ' + s).strip()
        if len(cur.encode()) >= 500:
            paras.append(cur); total += len(cur.encode()) + 1; cur = ''
        if total >= LIMIT: break
    mode = 'a' if os.path.exists(os.path.join(out, l + '.txt')) else 'w'
    with open(os.path.join(out, l + '.txt'), mode) as fh:
        fh.write('\n'.join(paras) + '\n')
    print(l, len(paras), total)
