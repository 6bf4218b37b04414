#!/usr/bin/env python3
# Run 22: the compactions of each target's keyspace that ran inside each point's measured window, from a
# bench/letting-it-be.sh OUT directory (its compaction-history.txt and every target's report.json):
#   in-window-compactions.py OUT  ->  | target | point | txn/s | compactions | MB in (compressed) |
import json,re,datetime,sys,os
d=sys.argv[1]
hist=open(os.path.join(d,'compaction-history.txt')).read().splitlines()
rows=[]
for l in hist:
    p=l.split()
    if len(p)>6 and re.match(r'\d{4}-\d\d-\d\dT',p[3]):
        t=datetime.datetime.fromisoformat(p[3]).replace(tzinfo=datetime.timezone.utc).timestamp()
        rows.append((p[1],p[2],t,int(p[4])))
for tgt in sorted(x for x in os.listdir(d) if re.match(r'r\d-',x) and os.path.isdir(os.path.join(d,x))):
    rep=json.load(open(os.path.join(d,tgt,'report.json')))
    for run,ratio in zip(rep['runs'],['50%','5%']):
        s=run['window_start_unix_s']; du=run['measured_s']
        inwin=[(k,tb,b) for (k,tb,t,b) in rows if s<=t<=s+du and not k.startswith('system')]
        print(f"| {tgt} | {ratio} | {run['committed']/du:,.0f} | {len(inwin)} | {sum(b for *_,b in inwin)/1e6:.1f} |")
