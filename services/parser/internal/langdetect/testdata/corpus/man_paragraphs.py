# Writes testdata/corpus/<code>.txt from the man pages: python3 man_paragraphs.py OUTDIR
import os, subprocess, sys, re, unicodedata
langs = {'cs':'cs','da':'da','de':'de','es':'es','fi':'fi','fr':'fr','hr':'hr','hu':'hu','id':'id','it':'it','ja':'ja','ko':'ko','nl':'nl','pl':'pl','pt':'pt','ro':'ro','ru':'ru','sl':'sl','sr':'sr','sv':'sv','tr':'tr','uk':'uk','zh_CN':'zh','en':'en'}
out = sys.argv[1]
LIMIT = 9000
EN = {'the','and','of','to','be','this','with','that','are','if','by','it','which','you','will','when','from','an','as','not'}
for d, code in langs.items():
    base = '/usr/share/man' if d == 'en' else '/usr/share/man/' + d
    files = []
    for sec in sorted(os.listdir(base)):
        if not sec.startswith('man'): continue
        for f in sorted(os.listdir(os.path.join(base, sec))):
            files.append(os.path.join(base, sec, f))
    if d == 'en':
        files = files[::7]
    paras_by_file = []
    for f in files:
        try:
            txt = subprocess.run(['man', '-l', f], env={'MANWIDTH':'3000','LANG':'C.UTF-8','PATH':os.environ['PATH']}, capture_output=True, timeout=20).stdout.decode('utf-8', 'replace')
        except Exception:
            continue
        txt = re.sub('.\b', '', txt)
        ps = []
        for line in txt.split('\n'):
            s = ' '.join(line.split())
            if len(s.encode()) < 250: continue
            letters = sum(1 for c in s if c.isalpha())
            if letters < 0.7 * len(s): continue
            if d != 'en':
                ws = re.findall(r'[a-zA-Z]+', s.lower()); tot = len(s.split())
                en = sum(1 for w in ws if w in EN)
                if en >= 3 and en >= 0.05 * tot: continue
            ps.append(s)
        if ps: paras_by_file.append(ps)
    seen, picked, total = set(), [], 0
    i = 0
    while total < LIMIT and any(paras_by_file):
        for ps in paras_by_file:
            if i < len(ps) and ps[i] not in seen and total < LIMIT:
                p = ps[i]
                b = p.encode()
                if len(b) > 1500:
                    b = b[:1500]
                    p = b.decode('utf-8', 'ignore').rsplit(' ', 1)[0]
                seen.add(ps[i]); picked.append(p); total += len(p.encode()) + 1
        i += 1
        if all(i >= len(ps) for ps in paras_by_file): break
    with open(os.path.join(out, code + '.txt'), 'w') as fh:
        fh.write('\n'.join(picked) + '\n')
    print(code, len(picked), total)
