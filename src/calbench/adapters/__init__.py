"""Other libraries' calibrators as calbench plug-ins, so a study runs them beside calbench's own
(``config/arena_fmnist.yaml``) and the report compares the implementations of each method
(:mod:`calbench.arena`).

Each adapter is a :class:`calbench.calibrators.Calibrator` under a dotted name ``library.method``
and is an entry point of group ``calbench.calibrators`` (pyproject.toml, extra ``arena`` for
the libraries). ``same_as`` names the calbench method it implements (``None``: none).
"""

#: name -> ``module:Class``; equal to the entry points in pyproject.toml (a test checks)
ADAPTERS = {
    "netcal.ts": "calbench.adapters.netcal:NetcalTS",
    "netcal.hist": "calbench.adapters.netcal:NetcalHist",
    "netcal.iso": "calbench.adapters.netcal:NetcalIso",
    "netcal.bbq": "calbench.adapters.netcal:NetcalBBQ",
    "netcal.enir": "calbench.adapters.netcal:NetcalENIR",
    "probmetrics.ts": "calbench.adapters.probmetrics:ProbmetricsTS",
    "probmetrics.svs": "calbench.adapters.probmetrics:ProbmetricsSVS",
    "probmetrics.sms": "calbench.adapters.probmetrics:ProbmetricsSMS",
    "betacal.beta": "calbench.adapters.others:BetacalBeta",
    "venn_abers.ivap": "calbench.adapters.others:VennAbersIVAP",
    "sklearn.iso": "calbench.adapters.others:SklearnIsotonic",
    "sklearn.sigmoid": "calbench.adapters.others:SklearnSigmoid",
}
