"""Short texts shared by the text-encoder backend tests: abstracts of several lengths and a one-word query."""

ABSTRACTS = [
    "Vitamin D supplementation reduces the risk of hip fractures in older adults.",
    "coffee",
    "A randomised trial of statins in patients with chronic kidney disease and no history of heart disease.",
    "Sleep deprivation is associated with obesity in children and adolescents across several cohorts.",
]
